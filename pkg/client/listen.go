package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/xaalis/xaalis/pkg/webhook"
)

// StreamEvent is one event of the event stream.
type StreamEvent struct {
	// ID is the event id; Type its type (payment.success, ...).
	ID, Type string
	// Data is the event in the 2026-06-01 webhook format: the very body a
	// webhook endpoint in that format receives.
	Data []byte
}

// Parse reads Data with pkg/webhook.
func (e *StreamEvent) Parse() (*webhook.Event, error) { return webhook.Parse(e.Data) }

// ListenParams configures Listen.
type ListenParams struct {
	// Types filters the events: types, or prefixes ending in * (payout.*);
	// empty is every event.
	Types []string
	// LastEventID resumes after this event (of the last 24 hours) rather
	// than with the events from now on.
	LastEventID string
	// OnConnect, when set, is called each time the stream is open, with
	// the event it resumes after ("" for a first connection without
	// LastEventID).
	OnConnect func(resumedAfter string)
	// OnDisconnect, when set, is called when an open stream drops, or an
	// attempt to open one fails (a refused connection, a 5xx), before
	// Listen tries again.
	OnDisconnect func(err error)
	// IdleTimeout is how long a stream may stay silent (the server sends a
	// keep-alive every 15 s) before it is taken for dead and reopened;
	// 0 is 45 s.
	IdleTimeout time.Duration
}

// Listen consumes GET /v1/events/stream: it yields each new event of the
// key's account and mode, in the order they committed. When the stream
// drops it reconnects (with jittered backoff) with Last-Event-ID (the
// last event yielded, or the stream's resume point past it), so no
// event is missed or yielded twice. It ends when ctx is done (without an
// error) or on an error it cannot retry (a *Error: a bad key, a type
// filter the server refuses, a LastEventID it cannot resume after), which
// it yields last.
func (c *Client) Listen(ctx context.Context, p *ListenParams) iter.Seq2[*StreamEvent, error] {
	if p == nil {
		p = &ListenParams{}
	}
	return func(yield func(*StreamEvent, error) bool) {
		last := p.LastEventID
		backoff := c.minBackoff
		hc := *c.http
		hc.Timeout = 0 // a stream lasts
		for {
			got, err := c.listenOnce(ctx, &hc, p, last, func(e *StreamEvent) bool {
				last = e.ID
				return yield(e, nil)
			}, func(id string) { last = id })
			if ctx.Err() != nil || errors.Is(err, errStop) {
				return
			}
			var e *Error
			if errors.As(err, &e) && e.HTTPStatus < 500 && e.HTTPStatus != http.StatusTooManyRequests {
				yield(nil, err)
				return
			}
			if got {
				backoff = c.minBackoff
			}
			if p.OnDisconnect != nil {
				p.OnDisconnect(err)
			}
			wait := c.jittered(backoff)
			if errors.As(err, &e) && e.RetryAfter > wait {
				wait = e.RetryAfter
			}
			backoff = min(backoff*2, c.maxBackoff)
			if c.sleep(ctx, wait) != nil {
				return
			}
		}
	}
}

var errStop = errors.New("stopped by the caller")

// listenOnce opens the stream once and reads it until it ends. It reports
// whether it got an event. A message of an id alone (no event, no data)
// is where to resume from, given to resumeAt: the server sends one when
// the stream opens and after events the filter passed over.
func (c *Client) listenOnce(ctx context.Context, hc *http.Client, p *ListenParams, last string, yield func(*StreamEvent) bool, resumeAt func(string)) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := c.base + "/v1/events/stream"
	if len(p.Types) > 0 {
		u += "?" + url.Values{"types": {strings.Join(p.Types, ",")}}.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", c.userAgent)
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	res, err := hc.Do(req)
	if err != nil {
		return false, fmt.Errorf("xaalis: event stream: %w", err)
	}
	if res.StatusCode != http.StatusOK {
		return false, decodeAnswer(res, nil)
	}
	defer res.Body.Close()
	if p.OnConnect != nil {
		p.OnConnect(last)
	}
	idle := p.IdleTimeout
	if idle <= 0 {
		idle = 45 * time.Second
	}
	watchdog := time.AfterFunc(idle, cancel)
	defer watchdog.Stop()

	got := false
	br := bufio.NewReader(res.Body)
	var ev StreamEvent
	var data []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF // the server closed the stream
			}
			return got, fmt.Errorf("xaalis: event stream: %w", err)
		}
		watchdog.Reset(idle)
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "":
			// A complete message; a message cut by a dropped connection is
			// never yielded.
			if ev.ID != "" && ev.Type == "" && len(data) == 0 {
				resumeAt(ev.ID)
			} else if ev.ID != "" {
				ev.Data = []byte(strings.Join(data, "\n"))
				e := ev
				got = true
				if !yield(&e) {
					return got, errStop
				}
			}
			ev, data = StreamEvent{}, nil
		case field == "": // a comment: keep-alive
		case field == "id":
			ev.ID = value
		case field == "event":
			ev.Type = value
		case field == "data":
			data = append(data, value)
		}
	}
}
