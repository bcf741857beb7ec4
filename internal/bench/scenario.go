package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Scenario names, in the order `--scenario all` runs them: the floors
// first, since every other figure is compared with them.
const (
	FloorHTTP             = "floor-http"
	FloorDB               = "floor-db"
	FloorFsync            = "floor-fsync"
	FloorFsyncBusy        = "floor-fsync-busy"
	FloorTx               = "floor-tx"
	CreatePayment         = "create-payment"
	CreatePaymentCheckout = "create-payment-checkout"
	Replay                = "replay"
	Status                = "status"
	List                  = "list"
	Payout                = "payout"
	Mixed                 = "mixed"
	WebhookDrain          = "webhook-drain"
)

// All lists every scenario, floors first.
var All = []string{FloorFsync, FloorFsyncBusy, FloorTx, FloorHTTP, FloorDB, CreatePayment, CreatePaymentCheckout, Replay, Status, List, Payout, Mixed, WebhookDrain}

// Known reports whether name is a scenario.
func Known(name string) bool {
	for _, s := range All {
		if s == name {
			return true
		}
	}
	return false
}

// IsFloor reports whether the scenario is one of the floors.
func IsFloor(name string) bool {
	return name == FloorHTTP || name == FloorDB || name == FloorFsync || name == FloorFsyncBusy || name == FloorTx
}

// IsPhysicalFloor reports whether the floor measures the disk or the
// database alone, one operation at a time.
func IsPhysicalFloor(name string) bool {
	return name == FloorFsync || name == FloorFsyncBusy || name == FloorTx
}

// Env is what a scenario runs against.
type Env struct {
	// API reaches the server as the scenario's own merchant.
	API *API
	// RunID makes Idempotency-Keys and merchant_refs unique to this run.
	RunID string
	Load  Load
	// Seed is how many payments status and mixed create before measuring.
	Seed int
	// Store and MerchantID, when set, are the server's database and the
	// scenario's merchant: floor-db writes there directly.
	Store      xaalis.Store
	MerchantID string
	// DBURL is the database's URL, for the physical floors.
	DBURL string
	// Existing, when set, are payments of the merchant already present
	// (the big seed): status, list and mixed use them instead of
	// creating Seed payments first.
	Existing []xaalis.SeededPayment
	// DrainTimeout bounds how long webhook-drain waits, after producing,
	// for every event to be acknowledged.
	DrainTimeout time.Duration
	// Progress receives a line per step (nil: none).
	Progress io.Writer
}

func (e *Env) logf(format string, args ...any) {
	if e.Progress != nil {
		fmt.Fprintf(e.Progress, format+"\n", args...)
	}
}

// Prepared is a scenario ready to measure.
type Prepared struct {
	Op Op
	// LatencyOf, when set, says the result's latency is not the request's
	// (webhook-drain: the delivery lag), filled by After.
	LatencyOf string
	// OnMeasure runs when the measured phase starts.
	OnMeasure func()
	// After runs once the measured phase ends; it may amend the result.
	After func(ctx context.Context, r *Result) error
	// Close releases what Prepare started.
	Close func()
	Notes []string
}

// Prepare sets a scenario up: funding, seed data, receivers.
func Prepare(ctx context.Context, name string, env *Env) (*Prepared, error) {
	switch name {
	case FloorHTTP:
		return prepareFloorHTTP(ctx, env)
	case FloorDB:
		return prepareFloorDB(ctx, env)
	case FloorFsync:
		return prepareFloorFsync(ctx, env)
	case FloorFsyncBusy:
		return prepareFloorFsyncBusy(ctx, env)
	case FloorTx:
		return prepareFloorTx(ctx, env)
	case CreatePayment:
		return &Prepared{Op: env.createPayment("", "channel_a"), Notes: []string{
			"test mode, provider channel_a, payer numbers ending 0001 (the simulator settles success at once): " +
				"idempotency claim, insert, provider call, pending and success postings, payment.success event"}}, nil
	case CreatePaymentCheckout:
		return &Prepared{Op: env.createPayment("", ""), Notes: []string{
			"no provider: the payment stays initiated for the hosted checkout (no postings, no event)"}}, nil
	case Replay:
		return prepareReplay(ctx, env)
	case Status:
		return prepareStatus(ctx, env)
	case List:
		return prepareList(ctx, env)
	case Payout:
		return preparePayout(ctx, env)
	case Mixed:
		return prepareMixed(ctx, env)
	case WebhookDrain:
		return prepareDrain(ctx, env)
	}
	return nil, fmt.Errorf("unknown scenario %q", name)
}

// snPrefixes are Senegalese mobile prefixes: payer numbers vary over
// 5 000 numbers so that the BCEAO ceiling of one payer (2 000 000 XOF a
// month by default) is never what a run measures.
var snPrefixes = [...]string{"77", "78", "76", "70", "75"}

// Phone is a valid Senegalese mobile number, distinct for seq modulo
// 5 000, ending in the four digits given (0001: the simulators' success).
func Phone(seq int64, last4 string) string {
	n := seq % 5000
	return fmt.Sprintf("+221%s%03d%s", snPrefixes[n/1000], n%1000, last4)
}

// paymentBody is a creation request; provider "" is a hosted checkout.
func paymentBody(ref string, amount int64, provider, phone string) []byte {
	b := make([]byte, 0, 320)
	b = fmt.Appendf(b, `{"merchant_ref":%q,"amount":%d,`, ref, amount)
	if provider != "" {
		b = fmt.Appendf(b, `"provider":%q,`, provider)
	}
	b = fmt.Appendf(b, `"payer":{"phone":%q,"name":"Awa Diop"},"success_url":"https://shop.example/thanks",`+
		`"failed_url":"https://shop.example/sorry","metadata":{"order_id":%q}}`, phone, ref)
	return b
}

// createPayment is the op that creates one payment of 1 000 XOF.
func (e *Env) createPayment(kind, provider string) Op {
	return func(ctx context.Context, seq int64) Outcome {
		ref := fmt.Sprintf("%s-%d", e.RunID, seq)
		rep, err := e.API.Do(ctx, http.MethodPost, "/v1/payments", e.API.Secret, ref,
			paymentBody(ref, 1000, provider, Phone(seq, "0001")))
		return outcome(kind, rep, err, http.StatusCreated)
	}
}

// seedPayments creates n successful payments and returns their
// references and ids.
func seedPayments(ctx context.Context, env *Env, n int, amount int64, tag string) (refs, ids []string, err error) {
	var mu sync.Mutex
	var failed atomic.Int64
	var firstErr atomic.Value
	op := func(ctx context.Context, seq int64) Outcome {
		ref := fmt.Sprintf("%s-%s-%d", env.RunID, tag, seq)
		rep, out := retrySeed(ctx, func() (*Reply, error) {
			return env.API.Do(ctx, http.MethodPost, "/v1/payments", env.API.Secret, ref,
				paymentBody(ref, amount, "channel_a", Phone(seq, "0001")))
		})
		if !out.OK {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, out.ErrorKey())
			return out
		}
		var t struct {
			ID        string `json:"id"`
			Reference string `json:"reference"`
			Status    string `json:"status"`
		}
		if err := rep.Data(&t); err != nil || t.Reference == "" {
			failed.Add(1)
			return out
		}
		mu.Lock()
		refs, ids = append(refs, t.Reference), append(ids, t.ID)
		mu.Unlock()
		return out
	}
	c := env.Load.Concurrency
	if c < 1 || c > 16 {
		c = 8
	}
	Run(ctx, Load{Concurrency: c, Duration: 5 * time.Minute, MaxRequests: int64(n)}, op)
	if failed.Load() > 0 {
		return nil, nil, fmt.Errorf("seeding: %d of %d payments failed (first: %v)", failed.Load(), n, firstErr.Load())
	}
	return refs, ids, nil
}

// seedAttempts and seedBackoff bound retrySeed: five attempts with 2 s of
// pauses between them wait out a stall of a loaded machine, not a server
// that never answers.
const (
	seedAttempts = 5
	seedBackoff  = 200 * time.Millisecond
)

// retrySeed sends one seeding request, and again, with the same
// Idempotency-Key and body, after a transport failure, a 5xx or a 409
// (the first attempt still in flight), as a merchant's client retries:
// the server runs the payment once whatever the attempts. Seeding is not
// measured, and a run that fails there for one stall of a loaded machine
// (under the race detector in CI, 4 of 5 funding payments once timed out)
// measures nothing.
func retrySeed(ctx context.Context, do func() (*Reply, error)) (*Reply, Outcome) {
	var rep *Reply
	var out Outcome
	for attempt := 1; ; attempt++ {
		var err error
		rep, err = do()
		out = outcome("", rep, err, http.StatusCreated)
		retry := err != nil || rep.Status >= 500 || rep.Status == http.StatusConflict
		if out.OK || !retry || attempt == seedAttempts || ctx.Err() != nil {
			return rep, out
		}
		select {
		case <-time.After(time.Duration(attempt) * seedBackoff):
		case <-ctx.Done():
			return rep, out
		}
	}
}

func prepareReplay(ctx context.Context, env *Env) (*Prepared, error) {
	key := env.RunID + "-replayed"
	body := paymentBody(key, 1000, "channel_a", Phone(0, "0001"))
	rep, err := env.API.Do(ctx, http.MethodPost, "/v1/payments", env.API.Secret, key, body)
	if err != nil {
		return nil, err
	}
	if rep.Status != http.StatusCreated {
		return nil, fmt.Errorf("replay: the first request answered %d %s", rep.Status, rep.Code())
	}
	op := func(ctx context.Context, seq int64) Outcome {
		rep, err := env.API.Do(ctx, http.MethodPost, "/v1/payments", env.API.Secret, key, body)
		out := outcome("", rep, err, http.StatusCreated)
		if out.OK && rep.Header.Get("Idempotent-Replay") != "true" {
			return Outcome{Status: rep.Status, Code: "not a replay"}
		}
		return out
	}
	return &Prepared{Op: op, Notes: []string{"the same Idempotency-Key and body each time: the stored 201, byte for byte"}}, nil
}

// existing returns the merchant's payments to read: the big seed's, or
// Seed payments created through the API now.
func existing(ctx context.Context, env *Env) (refs, ids []string, err error) {
	if len(env.Existing) > 0 {
		for _, p := range env.Existing {
			refs, ids = append(refs, p.Reference), append(ids, p.ID)
		}
		return refs, ids, nil
	}
	env.logf("  seeding %d payments", env.Seed)
	return seedPayments(ctx, env, env.Seed, 1000, "seed")
}

func prepareStatus(ctx context.Context, env *Env) (*Prepared, error) {
	refs, _, err := existing(ctx, env)
	if err != nil {
		return nil, err
	}
	op := func(ctx context.Context, seq int64) Outcome {
		rep, err := env.API.Do(ctx, http.MethodGet, "/v1/status/"+refs[(seq*7919)%int64(len(refs))], env.API.Secret, "", nil)
		return outcome("", rep, err, http.StatusOK)
	}
	return &Prepared{Op: op, Notes: []string{fmt.Sprintf("GET /v1/status/{reference} over %d references of existing payments", len(refs))}}, nil
}

// prepareList reads the first page of the merchant's payments, as a
// dashboard does: 20 newest and the exact total.
func prepareList(ctx context.Context, env *Env) (*Prepared, error) {
	if _, _, err := existing(ctx, env); err != nil {
		return nil, err
	}
	op := func(ctx context.Context, seq int64) Outcome {
		rep, err := env.API.Do(ctx, http.MethodGet, "/v1/payments?per_page=20", env.API.Secret, "", nil)
		return outcome("", rep, err, http.StatusOK)
	}
	return &Prepared{Op: op, Notes: []string{"GET /v1/payments?per_page=20: the 20 newest payments and the total"}}, nil
}

// Payout funding: payments of 2 000 000 XOF (a payer's default BCEAO
// ceiling, each from another number) fund payouts of 1 000 XOF.
const (
	fundingAmount = 2_000_000
	payoutAmount  = 1000
)

// fundingPayments is how many funding payments cover the payouts a run
// can make: 6 000 a second at most (several times what this machine
// does: below 1 500 a second, a run ran out of balance), or
// --max-requests.
func fundingPayments(l Load) int {
	payouts := (l.Duration + l.Warmup).Seconds() * 6000
	if l.MaxRequests > 0 {
		payouts = float64(2 * l.MaxRequests) // the warmup may make as many
	}
	// Net of the 1 % collection fee, each covers 1 960 payouts of 1 010 XOF.
	n := int(payouts/1960) + 1
	return min(max(n, 5), 5000)
}

func preparePayout(ctx context.Context, env *Env) (*Prepared, error) {
	n := fundingPayments(env.Load)
	env.logf("  funding the balance: %d payments of %d XOF", n, fundingAmount)
	if _, _, err := seedPayments(ctx, env, n, fundingAmount, "fund"); err != nil {
		return nil, err
	}
	op := func(ctx context.Context, seq int64) Outcome {
		ref := fmt.Sprintf("%s-po-%d", env.RunID, seq)
		body := fmt.Appendf(nil, `{"merchant_ref":%q,"amount":%d,"provider":"channel_a",`+
			`"recipient":{"phone":%q,"name":"Moussa Ndiaye"},"description":"bench"}`, ref, payoutAmount, Phone(seq, "4567"))
		rep, err := env.API.Do(ctx, http.MethodPost, "/v1/payouts", env.API.Secret, ref, body)
		return outcome("", rep, err, http.StatusCreated)
	}
	return &Prepared{Op: op, Notes: []string{fmt.Sprintf(
		"balance funded with %d × %d XOF; payouts of %d XOF via channel_a (the simulator pays at once), "+
			"each reserving under the merchant's balance lock", n, fundingAmount, payoutAmount)}}, nil
}

func prepareMixed(ctx context.Context, env *Env) (*Prepared, error) {
	refs, ids, err := existing(ctx, env)
	if err != nil {
		return nil, err
	}
	create := env.createPayment("write: create-payment", "channel_a")
	n := int64(len(refs))
	op := func(ctx context.Context, seq int64) Outcome {
		switch seq % 10 {
		case 0, 1:
			return create(ctx, seq)
		case 2, 3, 4, 5:
			rep, err := env.API.Do(ctx, http.MethodGet, "/v1/status/"+refs[(seq*7919)%n], env.API.Secret, "", nil)
			return outcome("read: status", rep, err, http.StatusOK)
		case 6, 7:
			rep, err := env.API.Do(ctx, http.MethodGet, "/v1/payments/"+ids[(seq*104729)%n], env.API.Secret, "", nil)
			return outcome("read: payment", rep, err, http.StatusOK)
		case 8:
			rep, err := env.API.Do(ctx, http.MethodGet, "/v1/balance", env.API.Secret, "", nil)
			return outcome("read: balance", rep, err, http.StatusOK)
		default:
			rep, err := env.API.Do(ctx, http.MethodGet, "/v1/payments?per_page=20", env.API.Secret, "", nil)
			return outcome("read: list", rep, err, http.StatusOK)
		}
	}
	return &Prepared{Op: op, Notes: []string{fmt.Sprintf("80 %% reads (40 status, 20 payment by id, 10 balance, 10 list of 20) "+
		"over %d seeded payments, 20 %% create-payment", n)}}, nil
}
