package xaalis

import (
	"context"
	"fmt"
	"net/netip"
	"time"
)

// Failed authentication is counted per client address in the database
// (rate_counters), so that the limit holds across every server process on
// one database. Only failures are counted, one small write each, and a
// process that has seen an address go past the limit stops counting it
// until the window ends (internal/http keeps that in memory): an address
// costs at most the limit, plus one per process, in writes per window.
// A valid key is never counted nor refused for its address: on a shared
// address (a carrier's NAT, an office), another client's wrong keys do
// not lock a merchant out.

// authFailureScope is the rate counter of an address's failed attempts.
func authFailureScope(ip netip.Addr) string { return "auth_fail:" + addressScope(ip) }

// CountAuthFailure counts one failed authentication (an unknown, revoked
// or malformed API key or operator token) from a client address, in the
// fixed window of the given length that holds now. It returns the count,
// this one included, and when the window ends.
func (a *App) CountAuthFailure(ctx context.Context, ip netip.Addr, window time.Duration) (int, time.Time, error) {
	now := a.now()
	start := now.Truncate(window)
	var n int
	err := a.Store.Update(ctx, func(tx Tx) (err error) {
		n, err = tx.CountRate(ctx, authFailureScope(ip), start)
		return err
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("count failed authentication: %w", err)
	}
	return n, start.Add(window), nil
}
