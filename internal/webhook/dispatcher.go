package webhook

import (
	"container/heap"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Concurrency is how many deliveries one RunOnce, or Run, sends at a
// time: enough that an account's sixteen endpoints hanging for their
// 15 s leave room for every other account's.
const Concurrency = 32

// DefaultLease is how long a claimed delivery is held.
const DefaultLease = time.Minute

// DefaultBatch is RunOnce's limit when given none.
const DefaultBatch = 32

// Dispatcher drains the delivery outbox: it claims due deliveries, sends
// each (signed, in its endpoint's format, to a URL that passes the
// Policy now), and records the attempt with the delivery's new state.
// Several dispatchers, in one process or several, may run on one store:
// a claim holds a delivery for one of them until the attempt is recorded
// or the lease ends.
type Dispatcher struct {
	Store  xaalis.WebhookStore
	Policy *Policy // nil: a strict Policy
	// Sender posts; nil: a Sender whose client follows Policy.
	Sender *Sender
	// Now is the clock (nil: time.Now): claims, signature timestamps,
	// attempt times and the schedule follow it.
	Now func() time.Time
	// NewID makes attempt ids (nil: UUIDs).
	NewID  func() string
	Logger *slog.Logger
	// Lease is how long a claim holds a delivery (0: DefaultLease; at
	// least Timeout + 10 s). A claimed delivery is started only while its
	// Timeout still fits in the lease; the others are left for a later
	// claim.
	Lease time.Duration
	// Timeout bounds an attempt (0: DefaultTimeout, the spec's 15 s).
	Timeout time.Duration
	// Jitter places a retry within ±10 % of its wait (nil: random).
	Jitter func() float64
	// Wake, when set, starts a round at once (deliveries committed); the
	// poll of Run stays, for missed wake-ups and for the retries of other
	// dispatchers. Retries this one scheduled wake Run when they come due.
	Wake <-chan struct{}
	// RetryScale multiplies every wait of the retry Schedule (0 or 1: the
	// documented schedule). Tests and demos shrink it (0.001: 60 ms,
	// 300 ms, 1.8 s, ...) to see retries settle in seconds.
	RetryScale float64

	once   sync.Once
	policy *Policy
	sender *Sender

	// retries are the times of the retries this dispatcher scheduled,
	// earliest first: Run sends each when it comes due rather than at the
	// first poll after it, which came up to a whole interval late.
	retryMu sync.Mutex
	retries timeHeap
}

// maxRetryTimes bounds the retry times a dispatcher remembers; past it,
// the poll finds the others.
const maxRetryTimes = 4096

// timeHeap is a min-heap of times (container/heap).
type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// retryAt remembers a retry this dispatcher scheduled.
func (d *Dispatcher) retryAt(at time.Time) {
	d.retryMu.Lock()
	defer d.retryMu.Unlock()
	if d.retries.Len() < maxRetryTimes {
		heap.Push(&d.retries, at)
	}
}

// nextRetry forgets the retries due at a round that started at start (it
// claimed them) and tells how long until the next one, when it comes
// before the poll (within every). A retry that came due during the round
// waits 0.
func (d *Dispatcher) nextRetry(start time.Time, every time.Duration) (time.Duration, bool) {
	d.retryMu.Lock()
	defer d.retryMu.Unlock()
	for d.retries.Len() > 0 && !d.retries[0].After(start) {
		heap.Pop(&d.retries)
	}
	if d.retries.Len() == 0 {
		return 0, false
	}
	// A millisecond past it, so that the claim finds it due.
	wait := d.retries[0].Sub(d.now()) + time.Millisecond
	if wait >= every {
		return 0, false
	}
	return max(wait, 0), true
}

func (d *Dispatcher) init() {
	d.once.Do(func() {
		d.policy = d.Policy
		if d.policy == nil {
			d.policy = &Policy{}
		}
		d.sender = d.Sender
		if d.sender == nil {
			d.sender = &Sender{Client: d.policy.Client(d.timeout())}
		}
	})
}

func (d *Dispatcher) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

func (d *Dispatcher) newID() string {
	if d.NewID != nil {
		return d.NewID()
	}
	return uuid.NewString()
}

func (d *Dispatcher) logger() *slog.Logger {
	if d.Logger != nil {
		return d.Logger
	}
	return slog.Default()
}

func (d *Dispatcher) lease() time.Duration {
	l := d.Lease
	if l <= 0 {
		l = DefaultLease
	}
	return max(l, d.timeout()+leaseMargin)
}

// leaseMargin is the least time a lease leaves after an attempt's timeout
// for recording it.
const leaseMargin = 10 * time.Second

func (d *Dispatcher) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return DefaultTimeout
}

// RunOnce claims up to limit due deliveries (DefaultBatch when limit is 0
// or less) and attempts them, Concurrency at a time. It returns how many
// it attempted, and the store errors met (a delivery whose attempt could
// not be recorded is claimed again when its lease ends).
func (d *Dispatcher) RunOnce(ctx context.Context, limit int) (int, error) {
	d.init()
	if limit <= 0 {
		limit = DefaultBatch
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		attempted int
		errs      []error
	)
	_, err := d.start(ctx, limit, make(chan struct{}, Concurrency), &wg, func(did bool, err error) {
		mu.Lock()
		defer mu.Unlock()
		if did {
			attempted++
		}
		if err != nil {
			errs = append(errs, err)
		}
	})
	wg.Wait()
	if err != nil {
		return 0, err
	}
	return attempted, errors.Join(errs...)
}

// start claims up to limit due deliveries and starts each as a slot of
// sem frees, without waiting for them to end: wg counts those running,
// and done is told of each one's outcome as it ends. It returns how many
// it claimed.
func (d *Dispatcher) start(ctx context.Context, limit int, sem chan struct{}, wg *sync.WaitGroup, done func(did bool, err error)) (int, error) {
	claimedAt := d.now()
	list, err := d.Store.ClaimDeliveries(ctx, claimedAt, d.lease(), limit)
	if err != nil {
		return 0, err
	}
	for _, dl := range list {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		// A delivery whose attempt could outlast its hold is left to the
		// next claim: another dispatcher may take it once the lease ends.
		if d.now().Add(d.timeout()).After(claimedAt.Add(d.lease())) {
			<-sem
			continue
		}
		wg.Add(1)
		go func(dl *xaalis.Delivery) {
			defer wg.Done()
			defer func() { <-sem }()
			done(d.deliver(ctx, dl))
		}(dl)
	}
	return len(list), nil
}

// Run sends due deliveries until ctx is done, Concurrency at a time. It
// claims as many as it has free slots, at once when deliveries commit
// (Wake), when a retry it scheduled comes due, every interval, and, while
// its claims come back full, whenever a delivery ends. A round does not
// wait for its slowest delivery: one receiver that hangs for its 15 s held
// every other merchant's webhooks as long.
func (d *Dispatcher) Run(ctx context.Context, every time.Duration) {
	d.init()
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	sem := make(chan struct{}, Concurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	// ended is told of every delivery that ends: a slot is free, and the
	// delivery may have scheduled a retry that comes before the poll.
	ended := make(chan struct{}, Concurrency)
	done := func(_ bool, err error) {
		if err != nil && ctx.Err() == nil {
			d.logger().Error("webhook deliveries", "err", err)
		}
		select {
		case ended <- struct{}{}:
		default:
		}
	}
	var claimed time.Time     // when the last claim started, on d's clock
	var claimedReal time.Time // the same, on the wall clock
	full, claim := false, true
	// soon claims again once claimGap has passed since the last claim,
	// when a slot freed meanwhile (the backlog's pace).
	var soon *time.Timer
	defer func() {
		if soon != nil {
			soon.Stop()
		}
	}()
	for {
		if claim {
			if soon != nil { // this claim is the one it would have made
				soon.Stop()
				soon = nil
			}
			claimed, claimedReal = d.now(), time.Now()
			if free := cap(sem) - len(sem); free > 0 {
				n, err := d.start(ctx, free, sem, &wg, done)
				if err != nil && ctx.Err() == nil {
					d.logger().Error("webhook deliveries", "err", err)
				}
				full = err == nil && n >= free
			} else {
				full = true // every slot busy: claim again when one frees
			}
		}
		if ctx.Err() != nil {
			return
		}
		var due <-chan time.Time
		var timer *time.Timer
		if wait, ok := d.nextRetry(claimed, every); ok {
			timer = time.NewTimer(wait)
			due = timer.C
		}
		var soonC <-chan time.Time
		if soon != nil {
			soonC = soon.C
		}
		claim = true
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-d.Wake:
		case <-due:
		case <-soonC:
			soon = nil
		case <-ended:
			// More may be due than there were slots for: claimed at once
			// when a quarter of the slots is free, else at most every
			// claimGap, so that the slots left by slow receivers keep
			// draining without a claim (a write of SQLite's one writer)
			// for each delivery. Otherwise only the retry timer is set
			// again.
			claim = full && cap(sem)-len(sem) >= cap(sem)/4
			if full && !claim && soon == nil {
				soon = time.NewTimer(max(0, claimGap-time.Since(claimedReal)))
			}
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// claimGap is the least time between two claims of a backlog while fewer
// than a quarter of the slots are free.
const claimGap = 10 * time.Millisecond

// target is where and how a delivery goes.
type target struct {
	url     string
	format  xaalis.PayloadFormat
	secrets []string
}

// errFinal marks a failure no retry can mend.
type errFinal struct{ msg string }

func (e errFinal) Error() string { return e.msg }

// resolveTarget finds a delivery's URL, format and secrets.
func (d *Dispatcher) resolveTarget(ctx context.Context, dl *xaalis.Delivery, now time.Time) (*target, error) {
	t := &target{url: dl.URL, format: dl.Format}
	if dl.EndpointID == "" {
		secret, err := d.Store.CallbackSecret(ctx, dl.MerchantID, dl.Mode, NewSecret())
		if err != nil {
			return nil, err
		}
		t.secrets = []string{secret}
	} else {
		ep, err := d.Store.WebhookEndpoint(ctx, dl.MerchantID, dl.EndpointID)
		if xaalis.ErrorCode(err) == xaalis.ENotFound || err == nil && ep.DeletedAt != nil {
			return nil, errFinal{"endpoint deleted"}
		}
		if err != nil {
			return nil, err
		}
		if t.url == "" {
			t.url = ep.URL
		}
		if !t.format.Valid() {
			t.format = ep.Format
		}
		t.secrets = ep.Secrets(now)
	}
	if !t.format.Valid() {
		t.format = xaalis.Format20260601
	}
	return t, nil
}

// deliver makes one attempt of a claimed delivery and records it. It
// reports whether an attempt was recorded.
func (d *Dispatcher) deliver(ctx context.Context, dl *xaalis.Delivery) (bool, error) {
	log := d.logger().With("delivery", dl.ID, "event", dl.EventID)
	start := d.now()
	attempt := &xaalis.Attempt{ID: d.newID(), DeliveryID: dl.ID, AttemptedAt: start}
	// The event and the endpoint (its URL, its secrets) are read below:
	// the delivery waits for what those reads saw to be durable.
	ctx = xaalis.WithReadMark(ctx)

	ev, err := d.Store.EventByID(ctx, dl.EventID)
	if xaalis.ErrorCode(err) == xaalis.ENotFound {
		err = errFinal{"event not found"}
	}
	var t *target
	if err == nil {
		t, err = d.resolveTarget(ctx, dl, start)
	}
	var final errFinal
	switch {
	case errors.As(err, &final):
		attempt.ErrorMessage = final.msg
		return true, d.record(ctx, dl, attempt, false, true)
	case err != nil:
		// The store failed: no attempt was made; the lease runs out and
		// the delivery is claimed again.
		log.Error("webhook delivery: store", "err", err)
		return false, err
	}

	body, err := Payload(t.format, ev)
	if err != nil {
		attempt.ErrorMessage = "payload: " + err.Error()
		return true, d.record(ctx, dl, attempt, false, true)
	}
	if err := d.Store.Durable(ctx); err != nil {
		// Nothing sent: the lease runs out and the delivery goes again.
		log.Error("webhook delivery: the database could not make what it read durable", "err", err)
		return false, err
	}
	if err := d.policy.Check(ctx, t.url); err != nil {
		if rules := Rules(err); len(rules) > 0 {
			attempt.ErrorMessage = "refused: " + strings.Join(rules, "; ")
		} else {
			attempt.ErrorMessage = "refused: " + err.Error()
		}
		return true, d.record(ctx, dl, attempt, false, false)
	}

	actx, cancel := context.WithTimeout(ctx, d.timeout())
	began := time.Now()
	status, err := d.sender.SendSigned(actx, t.url, body, t.secrets, d.now())
	cancel()
	attempt.DurationMS = time.Since(began).Milliseconds()
	attempt.HTTPStatus = status
	if err != nil {
		if ctx.Err() != nil {
			// Shut down mid-attempt: whether the receiver got it is
			// unknown, and it is not the receiver's failure. The lease runs
			// out and the delivery goes again (at least once).
			return false, nil
		}
		attempt.ErrorMessage = err.Error()
		// The error names no URL (SendError keeps the transport's reason
		// only); the URL is shown without its query.
		log.Info("webhook delivery failed", "url", logURL(t.url), "attempt", dl.Attempts+1, "err", attempt.ErrorMessage)
		return true, d.record(ctx, dl, attempt, false, false)
	}
	return true, d.record(ctx, dl, attempt, true, false)
}

// record stores an attempt and the delivery's new state.
func (d *Dispatcher) record(ctx context.Context, dl *xaalis.Delivery, a *xaalis.Attempt, ok, final bool) error {
	now := d.now()
	dl.Attempts++
	dl.LastAttemptAt = &a.AttemptedAt
	dl.UpdatedAt = now
	switch {
	case ok:
		dl.Status = xaalis.DeliverySucceeded
	case final:
		dl.Status = xaalis.DeliveryFailed
	default:
		if next, more := NextAttempt(dl.Attempts, now, d.Jitter); more {
			if d.RetryScale > 0 && d.RetryScale != 1 {
				next = now.Add(time.Duration(float64(next.Sub(now)) * d.RetryScale))
			}
			dl.Status, dl.NextAttemptAt = xaalis.DeliveryPending, next
		} else {
			dl.Status = xaalis.DeliveryFailed
		}
	}
	// A sent delivery is recorded even while shutting down, so that it is
	// not sent again.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.Store.RecordAttempt(rctx, dl, a); err != nil {
		d.logger().Error("webhook delivery: record attempt", "delivery", dl.ID, "err", err)
		return err
	}
	if dl.Status == xaalis.DeliveryPending {
		d.retryAt(dl.NextAttemptAt)
	}
	return nil
}

// logURL is a receiver's URL as a log line may show it: without its query
// and fragment, where merchants put the token that authenticates
// deliveries (a URL may not carry a user and password) and, at times, a
// phone number. The attempt's record, which only the merchant reads, keeps
// the whole URL.
func logURL(u string) string {
	if i := strings.IndexAny(u, "?#"); i >= 0 {
		return u[:i] + "?[REDACTED]"
	}
	return u
}
