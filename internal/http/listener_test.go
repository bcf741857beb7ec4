package http_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestStreamDeadlines: the listener's timeouts cut ordinary requests, and
// a streaming route that extends its deadlines (as GET /v1/events/stream
// does) outlives both ReadTimeout and WriteTimeout; one that does not is
// cut.
func TestStreamDeadlines(t *testing.T) {
	app := xaalis.NewApp(openSQLite(t))
	s := xhttp.NewServer(app, slogDiscard(), xhttp.DefaultConfig(), api.OpenAPI, nil)
	const events, every = 10, 100 * time.Millisecond
	stream := func(extend bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			rc := http.NewResponseController(w)
			for i := range events {
				if extend {
					if err := xhttp.ExtendDeadlines(w, 300*time.Millisecond); err != nil {
						t.Errorf("extend deadlines: %v", err)
						return
					}
				}
				if _, err := fmt.Fprintf(w, "data: %d\n\n", i); err != nil {
					return
				}
				if err := rc.Flush(); err != nil {
					return
				}
				select {
				case <-r.Context().Done():
					return
				case <-time.After(every):
				}
			}
			fmt.Fprint(w, "data: end\n\n")
		}
	}
	s.HandleForTest("GET /test/stream", stream(true))
	s.HandleForTest("GET /test/stream-unextended", stream(false))
	s.HandleForTest("GET /test/slow", func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(600 * time.Millisecond)
		fmt.Fprint(w, "late")
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := xhttp.NewHTTPServer(s, slogDiscard(), xhttp.Timeouts{ReadHeader: time.Second, Read: 250 * time.Millisecond,
		Write: 400 * time.Millisecond, Idle: time.Second}, nil)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	base := "http://" + ln.Addr().String()

	read := func(path string) ([]string, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
		res, err := c.Get(base + path)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var got []string
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				got = append(got, v)
			}
		}
		return got, sc.Err()
	}
	got, err := read("/test/stream")
	if err != nil || len(got) != events+1 || got[events] != "end" {
		t.Fatalf("extended stream (%v, past both timeouts): %v %v", time.Duration(events)*every, got, err)
	}
	got, _ = read("/test/stream-unextended")
	if len(got) > 5 {
		t.Fatalf("a stream that does not extend its deadlines ran past them: %d events", len(got))
	}
	if body, err := read("/test/slow"); err == nil && len(body) > 0 {
		t.Fatalf("an ordinary request outlived WriteTimeout")
	}
	c := &http.Client{Timeout: 5 * time.Second}
	if res, err := c.Get(base + "/test/slow"); err == nil {
		res.Body.Close()
		t.Fatalf("an ordinary request outlived WriteTimeout: %d", res.StatusCode)
	}
}
