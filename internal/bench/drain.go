package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xaalis/xaalis/internal/webhook"
	pw "github.com/xaalis/xaalis/pkg/webhook"
)

// DrainFailRate is the share of delivery attempts the webhook-drain
// receiver fails (HTTP 500).
const DrainFailRate = 0.20

// RetryScale is the dispatcher's retry scale in webhook-drain runs:
// webhook.Schedule divided by 600 (1 min becomes 100 ms, 5 min 500 ms,
// 30 min 3 s, ...), so that failed attempts are retried within a run. It
// keeps the schedule's shape: only time is compressed.
const RetryScale = 1.0 / 600

// ShortSchedule is the retry schedule RetryScale makes.
func ShortSchedule() []time.Duration {
	out := make([]time.Duration, len(webhook.Schedule))
	for i, d := range webhook.Schedule {
		out[i] = time.Duration(float64(d) * RetryScale)
	}
	return out
}

// receiver is a merchant's webhook endpoint on loopback: it verifies each
// delivery's signature, fails DrainFailRate of the attempts, and records
// when each event was first acknowledged.
type receiver struct {
	secret atomic.Value // string

	mu    sync.Mutex
	rng   *rand.Rand
	acked map[string]ack
	// seen is when each event the receiver was sent was created, whether
	// or not an attempt succeeded: an event never acknowledged still
	// counts in the lags.
	seen      map[string]time.Time
	attempts  int64
	failed    int64
	badSig    int64
	duplicate int64
}

type ack struct {
	created time.Time
	lag     time.Duration
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	now := time.Now()
	secret, _ := rc.secret.Load().(string)
	if err != nil || pw.Verify(body, r.Header.Get(pw.Header), secret, now, pw.DefaultTolerance) != nil {
		rc.mu.Lock()
		rc.badSig++
		rc.mu.Unlock()
		http.Error(w, "bad signature", http.StatusBadRequest)
		return
	}
	ev, perr := pw.Parse(body)
	var rec struct {
		UpdatedAt string `json:"updated_at"`
	}
	var created time.Time
	if perr == nil && json.Unmarshal(ev.Data, &rec) == nil {
		created, _ = time.Parse("2006-01-02T15:04:05.000Z", rec.UpdatedAt)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts++
	if perr == nil && !created.IsZero() {
		rc.seen[ev.ID] = created
	}
	if rc.rng.Float64() < DrainFailRate {
		rc.failed++
		http.Error(w, "injected failure", http.StatusInternalServerError)
		return
	}
	if perr != nil || created.IsZero() {
		rc.badSig++
		http.Error(w, "unreadable event", http.StatusBadRequest)
		return
	}
	if _, seen := rc.acked[ev.ID]; seen {
		rc.duplicate++
	} else {
		// The event is written with the record's updated_at, in the
		// transaction that commits the change: lag from commit to ack.
		rc.acked[ev.ID] = ack{created: created, lag: now.Sub(created)}
	}
	w.WriteHeader(http.StatusOK)
}

func prepareDrain(ctx context.Context, env *Env) (*Prepared, error) {
	rc := &receiver{rng: rand.New(rand.NewPCG(7, 20)), acked: map[string]ack{}, seen: map[string]time.Time{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: rc, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	closeSrv := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}
	url := "http://" + ln.Addr().String() + "/xaalis/webhooks"
	reg := fmt.Appendf(nil, `{"url":%q,"events":["payment.success"],"payload_format":"2026-06-01","description":"bench"}`, url)
	rep, err := env.API.Do(ctx, http.MethodPost, "/v1/webhook-endpoints", env.API.Secret, env.RunID+"-endpoint", reg)
	if err != nil {
		closeSrv()
		return nil, err
	}
	var ep struct {
		Secret string `json:"secret"`
	}
	if rep.Status != http.StatusCreated || rep.Data(&ep) != nil || ep.Secret == "" {
		closeSrv()
		return nil, fmt.Errorf("webhook-drain: registering %s answered %d %s (the server needs --insecure-webhooks for a loopback receiver)",
			url, rep.Status, rep.Code())
	}
	rc.secret.Store(ep.Secret)

	var produced atomic.Int64
	create := env.createPayment("", "channel_a")
	op := func(ctx context.Context, seq int64) Outcome {
		out := create(ctx, seq)
		if out.OK {
			produced.Add(1)
		}
		return out
	}
	var measureFrom time.Time
	p := &Prepared{Op: op, Close: closeSrv, LatencyOf: "lag from event commit to acknowledged delivery"}
	p.OnMeasure = func() { measureFrom = time.Now().Add(-time.Millisecond) }
	p.After = func(ctx context.Context, r *Result) error {
		want := produced.Load()
		start := time.Now()
		deadline := start.Add(env.DrainTimeout)
		for {
			rc.mu.Lock()
			got := int64(len(rc.acked))
			rc.mu.Unlock()
			if got >= want || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		rc.mu.Lock()
		defer rc.mu.Unlock()
		lags := drainLags(rc.acked, rc.seen, want, measureFrom.Truncate(time.Millisecond), start, time.Now())
		create := r.Latency
		r.Latency = Percentiles(lags)
		// The latency from the send is the creations', not the lags'.
		r.FromSend = nil
		r.LatencyOf = p.LatencyOf
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra["events_produced"] = want
		r.Extra["events_acknowledged"] = len(rc.acked)
		r.Extra["events_measured"] = len(lags)
		r.Extra["undelivered_after_drain"] = want - int64(len(rc.acked))
		r.Extra["delivery_attempts"] = rc.attempts
		r.Extra["injected_failures"] = rc.failed
		r.Extra["duplicate_deliveries"] = rc.duplicate
		r.Extra["bad_signatures"] = rc.badSig
		r.Extra["drain_wait_s"] = fmt.Sprintf("%.1f", time.Since(start).Seconds())
		r.Extra["create_latency_ms"] = fmt.Sprintf("p50 %.2f, p99 %.2f", create.P50, create.P99)
		if want > int64(len(rc.acked)) {
			r.Notes = append(r.Notes, fmt.Sprintf("%d events were not acknowledged within the drain timeout of %s",
				want-int64(len(rc.acked)), env.DrainTimeout))
		}
		return nil
	}
	p.Notes = []string{fmt.Sprintf("payments (magic success) produce payment.success events; the receiver on 127.0.0.1 verifies "+
		"the signature and fails %.0f %% of attempts with a 500", DrainFailRate*100)}
	return p, nil
}

// drainLags are the lags from commit to acknowledgement of the events
// created from from on. An event not acknowledged when the drain ends
// (now) counts with the lag it has so far, a lower bound: left out, it
// would make the percentiles better than they are. Of want events
// produced, one the receiver never saw counts from the end of production
// (its creation was before), measured or not.
func drainLags(acked map[string]ack, seen map[string]time.Time, want int64, from, produced, now time.Time) []time.Duration {
	var lags []time.Duration
	for _, a := range acked {
		if !a.created.Before(from) {
			lags = append(lags, a.lag)
		}
	}
	unacked := want - int64(len(acked))
	for id, created := range seen {
		if _, ok := acked[id]; !ok {
			unacked--
			if !created.Before(from) {
				lags = append(lags, now.Sub(created))
			}
		}
	}
	for ; unacked > 0; unacked-- {
		lags = append(lags, now.Sub(produced))
	}
	return lags
}
