package xaalis

import (
	"context"
	"errors"
	"sync"
)

// limitsInFlight is the limit volume of the payments this process is
// creating or sending to a provider: read against the limits but not yet
// in the volume counters (a payment counts there once pending or
// settled, in the transaction that moves it).
//
// The limits are checked against counters read before the command's
// transaction, so that the writer reads nothing (docs/write-path.md); two
// payments read at once each found the room the other was about to take,
// and forty payments of 1,000 XOF sent together all passed a daily limit
// of 20,000. A payment now reserves its amount here first, and its checks
// count what the others had reserved before it: of any two, the later
// one counts the earlier, in the counters once it committed, here until
// then. A payment counts for the others from its reservation to its
// release, so that near a limit another may be refused for room that a
// payment then refused (by the provider, or by a later check) did not
// take after all, or that a payment just committed and not yet released
// counts twice (in a burst, with group commit, several may: 14 payments
// of 1,000 sent at once against 15,000 passed 10 to 14 in an audit);
// the refusals a payment earns by itself (its amounts, the
// provider's rules) are made before it reserves (checkAlone). The ledger
// of reservations is the process's own: two processes on one PostgreSQL
// database each see only theirs (docs/payments.md).
//
// A pending payment counts in the hold counters by the minute it was
// created, for PendingHold: one chosen on the hosted page later than that
// after its creation is in no counter while pending.
type limitsInFlight struct {
	mu sync.Mutex
	m  map[string]int64 // volume scope -> minor units of XOF
}

type inFlightKey struct{}

// reserveLimits reserves t's limit amount in the volume scopes it counts
// in, through provider, and returns ctx carrying what the process's other
// payments had reserved in them (a.volume adds it), and the release,
// which the caller runs once the payment is in the counters or will not
// be.
func (a *App) reserveLimits(ctx context.Context, t *Transaction, provider string) (context.Context, func()) {
	if t.LimitAmount <= 0 {
		return ctx, func() {}
	}
	probe := Transaction{Mode: t.Mode, MerchantID: t.MerchantID, Provider: provider, PayerPhone: t.PayerPhone}
	scopes := VolumeScopes(&probe)
	f := &a.inFlight
	others := make(map[string]int64, len(scopes))
	f.mu.Lock()
	if f.m == nil {
		f.m = map[string]int64{}
	}
	for _, s := range scopes {
		others[s] = f.m[s]
		f.m[s] += t.LimitAmount
	}
	f.mu.Unlock()
	var once sync.Once
	return context.WithValue(ctx, inFlightKey{}, others), func() {
		once.Do(func() {
			f.mu.Lock()
			for _, s := range scopes {
				if f.m[s] -= t.LimitAmount; f.m[s] == 0 {
					delete(f.m, s)
				}
			}
			f.mu.Unlock()
		})
	}
}

// inFlightOf is what other payments of the process had reserved in scope
// when ctx's payment reserved its own.
func inFlightOf(ctx context.Context, scope string) int64 {
	others, _ := ctx.Value(inFlightKey{}).(map[string]int64)
	return others[scope]
}

type noVolumesKey struct{}

// checkAlone is checkCreation without the volume counters or the other
// payments' reservations: the refusals a payment earns by itself (its
// amount against the floors and ceilings, the provider's rules, a limit
// its amount alone passes). It reads nothing from the database unless it
// refuses. A payment refused by it never reserves room that others would
// count.
//
// When it refuses, the answer is the full check's first refusal, in
// creation's order: a volume limit reached comes before a provider's
// minimum (the precheck lists them in that order, and creation answers the
// first).
func (a *App) checkAlone(ctx context.Context, m *Merchant, t *Transaction, provider string) error {
	err := a.checkCreation(context.WithValue(ctx, noVolumesKey{}, true), m, t, provider)
	var e *Error
	if !errors.As(err, &e) {
		return err // nil, or a failure
	}
	if full := a.checkCreation(ctx, m, t, provider); full != nil {
		return full
	}
	return err
}

// volumesSkipped reports whether ctx is checkAlone's.
func volumesSkipped(ctx context.Context) bool { return ctx.Value(noVolumesKey{}) != nil }
