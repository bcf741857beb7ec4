package xaalis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Server instances. Each `xaalis serve` records itself in the database
// (StartInstance) and beats every InstanceOptions.Heartbeat; a clean
// shutdown removes its row. An Idempotency-Key claimed by a request
// belongs to the instance that runs it, so a retry knows at once whether
// anyone still runs the first attempt: while the owner lives the key
// answers 409 in flight; once the owner is gone (its row removed, or its
// heartbeat older than three intervals) a retry with the same request
// takes the key over and resumes the command from its last committed step.

// Instance is one running server as the database knows it.
type Instance struct {
	ID   string
	Host string
	PID  int
	// Process is random per operating-system process: two instances in one
	// process (tests) share it, and an instance with this host and PID but
	// another Process is an earlier process that the PID now names.
	Process     string
	StartedAt   time.Time
	HeartbeatAt time.Time
}

// InstanceStore keeps the rows of server instances. These are background
// writes, each its own transaction, never on a request's path.
type InstanceStore interface {
	// RegisterInstance records an instance, or renews its row.
	RegisterInstance(ctx context.Context, i *Instance) error
	// HeartbeatInstance sets an instance's heartbeat; ErrNotFound when its
	// row is gone (removed as dead: it must register again).
	HeartbeatInstance(ctx context.Context, id string, at time.Time) error
	// RemoveInstance deletes an instance's row: a clean shutdown, or an
	// instance found dead.
	RemoveInstance(ctx context.Context, id string) error
	// Instances lists every instance row.
	Instances(ctx context.Context) ([]*Instance, error)
}

// Default heartbeat: an owner is gone once its heartbeat is older than
// InstanceStaleBeats intervals.
const (
	DefaultHeartbeat   = 2 * time.Second
	InstanceStaleBeats = 3
)

// InstanceOptions describe the running process to StartInstance.
type InstanceOptions struct {
	Host    string
	PID     int
	Process string
	// Heartbeat is the interval of heartbeats (0: DefaultHeartbeat).
	Heartbeat time.Duration
	// Alive reports whether a process of this host with a PID runs; nil
	// when the platform cannot tell. Instances of this host whose process
	// is gone are removed at start, so that a restart on the same machine
	// (always the case with SQLite) takes their keys over at once.
	Alive  func(pid int) bool
	Logger *slog.Logger
}

// instanceState is the App's view of its own instance.
type instanceState struct {
	mu    sync.Mutex
	self  *Instance
	stale time.Duration
	// running holds the tokens of the claims this instance's requests hold
	// now: a claim of this instance whose token is not here was left by a
	// request that ended without releasing it (its database was away).
	running sync.Map
	// pending are store writes to retry until the database takes them.
	pending []func(context.Context) error
}

// InstanceID is the id of this App's instance; "" when it runs none
// (tests, command-line tools): its claims then hold a lease instead.
func (a *App) InstanceID() string {
	a.inst.mu.Lock()
	defer a.inst.mu.Unlock()
	if a.inst.self == nil {
		return ""
	}
	return a.inst.self.ID
}

// OwnerStale is how old an owner's heartbeat may be before its claims are
// taken over.
func (a *App) OwnerStale() time.Duration {
	a.inst.mu.Lock()
	defer a.inst.mu.Unlock()
	return a.inst.stale
}

// HoldClaim marks a claim token as run by a request of this instance
// until the returned function is called.
func (a *App) HoldClaim(token string) (done func()) {
	a.inst.running.Store(token, struct{}{})
	return func() { a.inst.running.Delete(token) }
}

// ClaimRunning reports whether a request of this instance runs the claim
// with this token.
func (a *App) ClaimRunning(token string) bool {
	_, ok := a.inst.running.Load(token)
	return ok
}

// RetryLater queues a store write that failed because the database was
// away (forgetting or completing a claim) to be retried with each
// heartbeat until it succeeds.
func (a *App) RetryLater(op func(context.Context) error) {
	a.inst.mu.Lock()
	defer a.inst.mu.Unlock()
	if len(a.inst.pending) >= maxPending {
		// A long outage under heavy traffic: forget the oldest. Its key
		// stays in flight until this instance stops (its own retries take
		// it over at once).
		a.inst.pending = a.inst.pending[1:]
	}
	a.inst.pending = append(a.inst.pending, op)
}

// maxPending bounds the writes kept for retry.
const maxPending = 100_000

// retryPending runs the queued writes once; those that fail stay queued.
func (a *App) retryPending(ctx context.Context) {
	a.inst.mu.Lock()
	ops := a.inst.pending
	a.inst.pending = nil
	a.inst.mu.Unlock()
	var left []func(context.Context) error
	for _, op := range ops {
		if err := op(ctx); err != nil {
			left = append(left, op)
		}
	}
	if len(left) > 0 {
		a.inst.mu.Lock()
		a.inst.pending = append(left, a.inst.pending...)
		a.inst.mu.Unlock()
	}
}

// InstanceRun is a registered instance; Stop ends it.
type InstanceRun struct {
	app  *App
	stop context.CancelFunc
	done chan struct{}
}

// StartInstance records this process as a server instance, removes the
// instances of this host whose process is gone, and beats in the
// background until Stop. Claims made from then on belong to it.
func (a *App) StartInstance(ctx context.Context, o InstanceOptions) (*InstanceRun, error) {
	every := o.Heartbeat
	if every <= 0 {
		every = DefaultHeartbeat
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := a.now()
	self := &Instance{ID: a.NewID(), Host: o.Host, PID: o.PID, Process: o.Process, StartedAt: now, HeartbeatAt: now}
	if err := a.Store.RegisterInstance(ctx, self); err != nil {
		return nil, fmt.Errorf("register instance: %w", err)
	}
	a.reapInstances(ctx, self, o.Alive, log)
	a.inst.mu.Lock()
	a.inst.self, a.inst.stale = self, InstanceStaleBeats*every
	a.inst.mu.Unlock()
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	run := &InstanceRun{app: a, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-bg.Done():
				return
			case <-t.C:
			}
			err := a.Store.HeartbeatInstance(bg, self.ID, a.now())
			if errors.Is(err, ErrNotFound) {
				// Another instance found this one dead (a long pause, a
				// database outage): its claims may have been taken over,
				// and their commands can no longer complete. Live on.
				self.HeartbeatAt = a.now()
				err = a.Store.RegisterInstance(bg, self)
				log.Warn("instance row was removed; registered again", "instance", self.ID)
			}
			if err != nil && bg.Err() == nil {
				log.Warn("instance heartbeat", "instance", self.ID, "error", err)
				continue
			}
			a.retryPending(bg)
		}
	}()
	log.Info("instance registered", "instance", self.ID, "host", self.Host, "pid", self.PID, "heartbeat", every.String())
	return run, nil
}

// reapInstances removes the instances of this host whose process is gone:
// a restart takes their claims over at once instead of waiting for their
// heartbeats to age.
func (a *App) reapInstances(ctx context.Context, self *Instance, alive func(int) bool, log *slog.Logger) {
	list, err := a.Store.Instances(ctx)
	if err != nil {
		log.Warn("list instances", "error", err)
		return
	}
	for _, i := range list {
		if i.ID == self.ID || i.Host != self.Host {
			continue
		}
		dead := i.PID == self.PID && i.Process != self.Process // an earlier process with our PID
		if !dead && i.PID != self.PID && alive != nil {
			dead = !alive(i.PID)
		}
		if dead {
			if err := a.Store.RemoveInstance(ctx, i.ID); err != nil {
				log.Warn("remove dead instance", "instance", i.ID, "error", err)
				continue
			}
			log.Info("removed the row of a dead instance: its Idempotency-Keys are free to retries", "instance", i.ID, "pid", i.PID)
		}
	}
}

// Stop ends the heartbeats, retries the queued writes once more, and
// removes the instance's row: its remaining claims (none, after a
// graceful shutdown) are free to retries at once.
func (r *InstanceRun) Stop(ctx context.Context) error {
	r.stop()
	<-r.done
	a := r.app
	a.retryPending(ctx)
	a.inst.mu.Lock()
	self := a.inst.self
	a.inst.self = nil
	a.inst.mu.Unlock()
	if self == nil {
		return nil
	}
	if err := a.Store.RemoveInstance(ctx, self.ID); err != nil {
		return fmt.Errorf("remove instance: %w", err)
	}
	return nil
}
