// Package storetest is the conformance suite every xaalis.Store passes:
// internal/sqlite and internal/postgres both run it.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Opener returns a fresh, empty, migrated store for one test.
type Opener func(t *testing.T) xaalis.Store

// Run runs the whole suite against stores made by open.
func Run(t *testing.T, open Opener) {
	// Not parallel, and first: it counts the statements of the process.
	t.Run("ClaimWrittenOnce", func(t *testing.T) { testClaimWrittenOnce(t, open(t)) })
	t.Run("Merchant", func(t *testing.T) { t.Parallel(); testMerchant(t, open(t)) })
	t.Run("Key", func(t *testing.T) { t.Parallel(); testKey(t, open(t)) })
	t.Run("KeyByHashIdempotency", func(t *testing.T) { t.Parallel(); testKeyByHashIdempotency(t, open(t)) })
	t.Run("Pepper", func(t *testing.T) { t.Parallel(); testPepper(t, open(t)) })
	t.Run("UpdateRollsBack", func(t *testing.T) { t.Parallel(); testRollback(t, open(t)) })
	t.Run("Durable", func(t *testing.T) { t.Parallel(); testDurable(t, open(t)) })
	t.Run("Idempotency", func(t *testing.T) { t.Parallel(); testIdempotency(t, open(t)) })
	t.Run("IdempotencyConcurrent", func(t *testing.T) { t.Parallel(); testIdempotencyConcurrent(t, open(t)) })
	t.Run("IdempotencyUnseen", func(t *testing.T) { t.Parallel(); testIdempotencyUnseen(t, open(t)) })
	t.Run("IdempotencyQuota", func(t *testing.T) { t.Parallel(); testQuota(t, open(t)) })
	t.Run("Instances", func(t *testing.T) { t.Parallel(); testInstances(t, open(t)) })
	t.Run("IdempotencyOwner", func(t *testing.T) { t.Parallel(); testIdempotencyOwner(t, open(t)) })
	t.Run("Plan", func(t *testing.T) { t.Parallel(); testPlan(t, open(t)) })
	t.Run("SettingOnce", func(t *testing.T) { t.Parallel(); testSettingOnce(t, open(t)) })
	t.Run("Transaction", func(t *testing.T) { t.Parallel(); testTransaction(t, open(t)) })
	t.Run("TransactionByMerchantRefAndPayer", func(t *testing.T) { t.Parallel(); testTransactionByMerchantRefAndPayer(t, open(t)) })
	t.Run("TransactionList", func(t *testing.T) { t.Parallel(); testTransactionList(t, open(t)) })
	t.Run("DueAndVolume", func(t *testing.T) { t.Parallel(); testDueAndVolume(t, open(t)) })
	t.Run("Events", func(t *testing.T) { t.Parallel(); testEvents(t, open(t)) })
	t.Run("LedgerPost", func(t *testing.T) { t.Parallel(); testLedgerPost(t, open(t)) })
	t.Run("LedgerUnbalanced", func(t *testing.T) { t.Parallel(); testLedgerUnbalanced(t, open(t)) })
	t.Run("LedgerNegative", func(t *testing.T) { t.Parallel(); testLedgerNegative(t, open(t)) })
	t.Run("LockBalance", func(t *testing.T) { t.Parallel(); testLockBalance(t, open(t)) })
	t.Run("LedgerConcurrent", func(t *testing.T) { t.Parallel(); testLedgerConcurrent(t, open(t)) })
	t.Run("LedgerConcurrentCross", func(t *testing.T) { t.Parallel(); testLedgerConcurrentCross(t, open(t)) })
	t.Run("LedgerCheckedDebits", func(t *testing.T) { t.Parallel(); testLedgerCheckedDebits(t, open(t)) })
	t.Run("LedgerCheckAtCommit", func(t *testing.T) { t.Parallel(); testLedgerCheckAtCommit(t, open(t)) })
	t.Run("TransactionMoneyColumns", func(t *testing.T) { t.Parallel(); testTransactionMoneyColumns(t, open(t)) })
	t.Run("RefundedAmount", func(t *testing.T) { t.Parallel(); testRefundedAmount(t, open(t)) })
	t.Run("TransactionByIdempotencyKey", func(t *testing.T) { t.Parallel(); testTransactionByIdempotencyKey(t, open(t)) })
	t.Run("TransactionByIdempotencyKeyAndMerchantRef", func(t *testing.T) {
		t.Parallel()
		testTransactionByIdempotencyKeyAndMerchantRef(t, open(t))
	})
	t.Run("DueDispatch", func(t *testing.T) { t.Parallel(); testDueDispatch(t, open(t)) })
	t.Run("PayoutRequest", func(t *testing.T) { t.Parallel(); testPayoutRequest(t, open(t)) })
	t.Run("PayoutRequestsSince", func(t *testing.T) { t.Parallel(); testPayoutRequestsSince(t, open(t)) })
	t.Run("OperatorToken", func(t *testing.T) { t.Parallel(); testOperatorToken(t, open(t)) })
	t.Run("WebhookEndpoint", func(t *testing.T) { t.Parallel(); testWebhookEndpoint(t, open(t)) })
	t.Run("EventList", func(t *testing.T) { t.Parallel(); testEventList(t, open(t)) })
	t.Run("Deliveries", func(t *testing.T) { t.Parallel(); testDeliveries(t, open(t)) })
	t.Run("FanOut", func(t *testing.T) { t.Parallel(); testFanOut(t, open(t)) })
	t.Run("ClaimDeliveries", func(t *testing.T) { t.Parallel(); testClaimDeliveries(t, open(t)) })
	t.Run("ClaimDeliveriesConcurrent", func(t *testing.T) { t.Parallel(); ConcurrentClaims(t, open(t)) })
	t.Run("CallbackSecret", func(t *testing.T) { t.Parallel(); testCallbackSecret(t, open(t)) })
	t.Run("ListenSecret", func(t *testing.T) { t.Parallel(); testListenSecret(t, open(t)) })
	t.Run("EventStream", func(t *testing.T) { t.Parallel(); testEventStream(t, open(t)) })
	t.Run("EventStreamCommitOrder", func(t *testing.T) { t.Parallel(); testEventStreamCommitOrder(t, open(t)) })
	t.Run("RedeliveryTargets", func(t *testing.T) { t.Parallel(); testRedeliveryTargets(t, open(t)) })
	t.Run("Dispute", func(t *testing.T) { t.Parallel(); testDispute(t, open(t)) })
	t.Run("OneOpenDispute", func(t *testing.T) { t.Parallel(); testOneOpenDispute(t, open(t)) })
	t.Run("DisputeList", func(t *testing.T) { t.Parallel(); testDisputeList(t, open(t)) })
	t.Run("DueDisputes", func(t *testing.T) { t.Parallel(); testDueDisputes(t, open(t)) })
	t.Run("Splits", func(t *testing.T) { t.Parallel(); testSplits(t, open(t)) })
	t.Run("Subscription", func(t *testing.T) { t.Parallel(); testSubscription(t, open(t)) })
	t.Run("SubscriptionList", func(t *testing.T) { t.Parallel(); testSubscriptionList(t, open(t)) })
	t.Run("DueSubscriptions", func(t *testing.T) { t.Parallel(); testDueSubscriptions(t, open(t)) })
	t.Run("Customers", func(t *testing.T) { t.Parallel(); testCustomers(t, open(t)) })
	t.Run("PlanByID", func(t *testing.T) { t.Parallel(); testPlanByID(t, open(t)) })
	t.Run("MerchantRefPerKeyType", func(t *testing.T) { t.Parallel(); testMerchantRefPerKeyType(t, open(t)) })
	t.Run("IdempotencyKeyType", func(t *testing.T) { t.Parallel(); testIdempotencyKeyType(t, open(t)) })
	t.Run("OperatorTokenLifecycle", func(t *testing.T) { t.Parallel(); testOperatorTokenLifecycle(t, open(t)) })
	t.Run("AuditLog", func(t *testing.T) { t.Parallel(); testAuditLog(t, open(t)) })
	t.Run("RateCounter", func(t *testing.T) { t.Parallel(); testRateCounter(t, open(t)) })
	t.Run("ReturnHosts", func(t *testing.T) { t.Parallel(); testReturnHosts(t, open(t)) })
	t.Run("Wake", func(t *testing.T) { t.Parallel(); testWake(t, open(t)) })
	t.Run("Secrets", func(t *testing.T) { t.Parallel(); testSecrets(t, open(t)) })
	t.Run("Stats", func(t *testing.T) { t.Parallel(); testStats(t, open(t)) })
	t.Run("WebhookBacklog", func(t *testing.T) { t.Parallel(); testWebhookBacklog(t, open(t)) })
	t.Run("JobsDue", func(t *testing.T) { t.Parallel(); testJobsDue(t, open(t)) })
	t.Run("LatePolls", func(t *testing.T) { t.Parallel(); testLatePolls(t, open(t)) })
	t.Run("LedgerChecks", func(t *testing.T) { t.Parallel(); testLedgerChecks(t, open(t)) })
	t.Run("RateCount", func(t *testing.T) { t.Parallel(); testRateCount(t, open(t)) })
	t.Run("OperatorSessions", func(t *testing.T) { t.Parallel(); testOperatorSessions(t, open(t)) })
	t.Run("OpsLists", func(t *testing.T) { t.Parallel(); testOpsLists(t, open(t)) })
	t.Run("SeedPayments", func(t *testing.T) { t.Parallel(); testSeedPayments(t, open(t)) })
	t.Run("ClaimSetting", func(t *testing.T) { t.Parallel(); testClaimSetting(t, open(t)) })
}

func testSettingOnce(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	any := func() bool {
		var found bool
		if err := s.Update(ctx, func(tx xaalis.Tx) (err error) { found, err = tx.AnyMerchant(ctx); return err }); err != nil {
			t.Fatal(err)
		}
		return found
	}
	if any() {
		t.Fatal("an empty store has a merchant")
	}
	NewMerchant(t, s)
	if !any() {
		t.Fatal("AnyMerchant misses the merchant")
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx xaalis.Tx) error {
				ok, err := tx.InsertSettingOnce(ctx, "once", []byte(fmt.Sprint(i)))
				if ok {
					wins.Add(1)
				}
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d callers inserted the setting, want 1", wins.Load())
	}
	// A rolled-back insert leaves the name free.
	_ = s.Update(ctx, func(tx xaalis.Tx) error {
		if _, err := tx.InsertSettingOnce(ctx, "rolled-back", nil); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		ok, err := tx.InsertSettingOnce(ctx, "rolled-back", []byte("x"))
		if err == nil && !ok {
			t.Error("a rolled-back setting is still there")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// testClaimSetting: of callers claiming a setting at once with the same
// bound, one sets it; a later claim whose bound is past the value sets it
// again, one whose bound is not does not.
func testClaimSetting(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	claim := func(value, below string) bool {
		var ok bool
		if err := s.Update(ctx, func(tx xaalis.Tx) (err error) {
			ok, err = tx.ClaimSetting(ctx, "claim", []byte(value), []byte(below))
			return err
		}); err != nil {
			t.Error(err)
		}
		return ok
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if claim(fmt.Sprintf("%020d", 100+i), fmt.Sprintf("%020d", 50)) {
				wins.Add(1)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d callers claimed the setting, want 1", wins.Load())
	}
	if claim(fmt.Sprintf("%020d", 200), fmt.Sprintf("%020d", 100)) {
		t.Fatal("claimed while the value (100 or more) is not below 100")
	}
	if !claim(fmt.Sprintf("%020d", 300), fmt.Sprintf("%020d", 250)) {
		t.Fatal("not claimed, though the value is below the bound")
	}
}

// pluck lists f of each of xs, in order: the IDs or URLs a test compares.
func pluck[T any](xs []T, f func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// NewMerchant inserts an active merchant and returns it.
func NewMerchant(t testing.TB, s xaalis.Store) *xaalis.Merchant {
	t.Helper()
	m := &xaalis.Merchant{
		ID: xaalis.NewUUIDv7(), Name: "Boutique Dakar", Country: "SN", SettlementCurrency: xaalis.XOF,
		Status: xaalis.MerchantActive, KYC: xaalis.KYCPending, PayoutsEnabled: true, CreatedAt: t0, UpdatedAt: t0,
	}
	if err := s.Update(context.Background(), func(tx xaalis.Tx) error { return tx.CreateMerchant(context.Background(), m) }); err != nil {
		t.Fatalf("create merchant: %v", err)
	}
	return m
}

func testMerchant(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	got, err := s.Merchant(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != m.Name || got.Status != xaalis.MerchantActive || !got.CreatedAt.Equal(t0) || !got.PayoutsEnabled {
		t.Fatalf("merchant = %+v", got)
	}
	if _, err := s.Merchant(ctx, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("missing merchant: err = %v, want not_found", err)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		m, err := tx.MerchantForUpdate(ctx, m.ID)
		if err != nil {
			return err
		}
		st, kyc := xaalis.MerchantSuspended, xaalis.KYCApproved
		ips := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}
		xaalis.MerchantUpdate{Status: &st, KYC: &kyc, AllowedProviders: &[]string{"channel_a", "channel_b"}, AllowIPs: &ips}.Apply(m)
		m.UpdatedAt = t0.Add(time.Hour)
		return tx.UpdateMerchant(ctx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Merchant(ctx, m.ID)
	if got.Status != xaalis.MerchantSuspended || got.KYC != xaalis.KYCApproved || len(got.AllowedProviders) != 2 ||
		len(got.AllowIPs) != 2 || got.AllowIPs[1].String() != "2001:db8::/32" || !got.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("updated merchant = %+v", got)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error { return tx.UpdateMerchant(ctx, &xaalis.Merchant{ID: "nope"}) })
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("update missing merchant: err = %v", err)
	}
}

func testKey(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	exp := t0.Add(48 * time.Hour)
	k, secret := xaalis.NewKey(xaalis.NewUUIDv7(), m.ID, xaalis.KeySecret, xaalis.ModeLive,
		[]xaalis.Scope{xaalis.ScopePayout}, []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, &exp, []byte("pepper"), t0)
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	gk, gm, rec, err := s.KeyByHash(ctx, xaalis.HashKey([]byte("pepper"), secret), "")
	if err != nil || rec != nil {
		t.Fatal(err)
	}
	if gm.ID != m.ID || gk.ID != k.ID || gk.Mode != xaalis.ModeLive || gk.Type != xaalis.KeySecret ||
		len(gk.Scopes) != 1 || gk.Scopes[0] != xaalis.ScopePayout || gk.ExpiresAt == nil || !gk.ExpiresAt.Equal(exp) ||
		gk.RevokedAt != nil || len(gk.AllowIPs) != 1 || gk.Prefix != secret[:12] {
		t.Fatalf("key = %+v", gk)
	}
	if _, _, _, err := s.KeyByHash(ctx, xaalis.HashKey([]byte("other pepper"), secret), ""); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("wrong hash: err = %v", err)
	}
	dup := *k
	dup.ID = xaalis.NewUUIDv7()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateKey(ctx, &dup) }); err == nil {
		t.Fatal("a second key with the same hash was stored")
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.RevokeKey(ctx, k.ID, t0.Add(time.Hour)) }); err != nil {
		t.Fatal(err)
	}
	gk, err = s.Key(ctx, k.ID)
	if err != nil || gk.RevokedAt == nil || !gk.RevokedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("revoked key = %+v, %v", gk, err)
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.RevokeKey(ctx, "nope", t0) }); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("revoke missing: %v", err)
	}
}

func testPepper(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	peppers := make([][]byte, 8)
	for i := range peppers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := s.Pepper(ctx)
			if err != nil {
				t.Error(err)
			}
			peppers[i] = p
		}()
	}
	wg.Wait()
	for _, p := range peppers {
		if len(p) != 32 || string(p) != string(peppers[0]) {
			t.Fatalf("peppers differ or are short: %x vs %x", p, peppers[0])
		}
	}
}

func testRollback(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := &xaalis.Merchant{ID: xaalis.NewUUIDv7(), Name: "x", Country: "SN", SettlementCurrency: xaalis.XOF,
		Status: xaalis.MerchantActive, KYC: xaalis.KYCPending, CreatedAt: t0, UpdatedAt: t0}
	boom := errors.New("boom")
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.CreateMerchant(ctx, m); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := s.Merchant(ctx, m.ID); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("rolled-back merchant is there: %v", err)
	}
}

func claim(s xaalis.IdempotencyScope, fp string, token string, now time.Time) xaalis.Claim {
	return xaalis.Claim{Scope: s, Fingerprint: []byte(fp), Token: token, Now: now, Lease: time.Minute}
}

// testKeyByHashIdempotency: the key's read also returns the
// Idempotency-Key of the key's own merchant, mode and key type, as
// IdempotencyKey reads it (in flight with its owner's heartbeat, then done
// with its answer), and none of another mode, key type or merchant.
func testKeyByHashIdempotency(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m, m2 := NewMerchant(t, s), NewMerchant(t, s)
	k, secret := xaalis.NewKey(xaalis.NewUUIDv7(), m.ID, xaalis.KeySecret, xaalis.ModeLive, nil, nil, nil, []byte("pepper"), t0)
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	hash := xaalis.HashKey([]byte("pepper"), secret)
	read := func(idemKey string) *xaalis.IdempotencyRecord {
		t.Helper()
		gk, gm, rec, err := s.KeyByHash(ctx, hash, idemKey)
		if err != nil || gk.ID != k.ID || gm.ID != m.ID {
			t.Fatalf("key by hash with %q: %v, %v, %v", idemKey, gk, gm, err)
		}
		return rec
	}
	if rec := read("k1"); rec != nil {
		t.Fatalf("a key never used: %+v", rec)
	}
	inst := &xaalis.Instance{ID: xaalis.NewUUIDv7(), Host: "h1", PID: 100, Process: "p1", StartedAt: t0, HeartbeatAt: t0}
	if err := s.RegisterInstance(ctx, inst); err != nil {
		t.Fatal(err)
	}
	sc := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeLive, KeyType: xaalis.KeySecret, Key: "k1"}
	c := claim(sc, "fp", "a", t0)
	c.Instance = inst.ID
	if r, err := s.ClaimIdempotency(ctx, c); err != nil || r.Outcome != xaalis.ClaimAcquired {
		t.Fatalf("claim: %+v, %v", r, err)
	}
	same := func(got *xaalis.IdempotencyRecord) {
		t.Helper()
		want, err := s.IdempotencyKey(ctx, sc)
		if err != nil {
			t.Fatal(err)
		}
		if got == nil || string(got.Fingerprint) != string(want.Fingerprint) || got.Token != want.Token ||
			got.Done != want.Done || got.Owner != want.Owner || !sameTimePtr(got.OwnerHeartbeat, want.OwnerHeartbeat) ||
			!sameTime(got.LockedUntil, want.LockedUntil) || !sameTime(got.ExpiresAt, want.ExpiresAt) ||
			(got.Response == nil) != (want.Response == nil) ||
			(got.Response != nil && (got.Response.Status != want.Response.Status || string(got.Response.Body) != string(want.Response.Body) ||
				got.Response.ContentType != want.Response.ContentType || got.Response.Location != want.Response.Location)) {
			t.Fatalf("with the key: %+v; IdempotencyKey: %+v", got, want)
		}
	}
	rec := read("k1")
	same(rec)
	if rec.Done || rec.Owner != inst.ID || rec.OwnerHeartbeat == nil || string(rec.Fingerprint) != "fp" {
		t.Fatalf("in flight: %+v", rec)
	}
	resp := xaalis.StoredResponse{Status: 201, ContentType: "application/json", Location: "/v1/x", Body: []byte(`{"a":1}`)}
	if err := s.CompleteIdempotency(ctx, sc, "a", resp); err != nil {
		t.Fatal(err)
	}
	rec = read("k1")
	same(rec)
	if !rec.Done || rec.Response == nil || string(rec.Response.Body) != string(resp.Body) {
		t.Fatalf("done: %+v", rec)
	}
	for _, other := range []xaalis.IdempotencyScope{
		{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "k2"},
		{MerchantID: m.ID, Mode: xaalis.ModeLive, KeyType: xaalis.KeyPublishable, Key: "k2"},
		{MerchantID: m2.ID, Mode: xaalis.ModeLive, KeyType: xaalis.KeySecret, Key: "k2"},
	} {
		if r, err := s.ClaimIdempotency(ctx, claim(other, "fp", "b", t0)); err != nil || r.Outcome != xaalis.ClaimAcquired {
			t.Fatalf("claim %+v: %+v, %v", other, r, err)
		}
	}
	if rec := read("k2"); rec != nil {
		t.Fatalf("another mode's, key type's or merchant's key: %+v", rec)
	}
	if _, _, _, err := s.KeyByHash(ctx, xaalis.HashKey([]byte("other pepper"), secret), "k1"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("wrong hash: err = %v", err)
	}
}

func testIdempotency(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	sc := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "k1"}
	want := func(c xaalis.Claim, o xaalis.ClaimOutcome) xaalis.ClaimResult {
		t.Helper()
		r, err := s.ClaimIdempotency(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != o {
			t.Fatalf("claim %q at %v: outcome %d, want %d", c.Token, c.Now, r.Outcome, o)
		}
		return r
	}
	want(claim(sc, "fp", "a", t0), xaalis.ClaimAcquired)
	want(claim(sc, "fp", "b", t0.Add(time.Second)), xaalis.ClaimInFlight)
	want(claim(sc, "other", "b", t0.Add(time.Second)), xaalis.ClaimConflict)
	// The other mode and another merchant are separate key spaces.
	want(claim(xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeLive, KeyType: xaalis.KeySecret, Key: "k1"}, "fp", "c", t0), xaalis.ClaimAcquired)
	m2 := NewMerchant(t, s)
	want(claim(xaalis.IdempotencyScope{MerchantID: m2.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "k1"}, "fp", "d", t0), xaalis.ClaimAcquired)

	resp := xaalis.StoredResponse{Status: 201, ContentType: "application/json", Location: "/v1/x", Body: []byte(`{"a":1}` + "\n")}
	if err := s.CompleteIdempotency(ctx, sc, "wrong-token", resp); !errors.Is(err, xaalis.ErrClaimLost) {
		t.Fatalf("complete with another token: %v", err)
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CompleteIdempotency(ctx, sc, "a", resp) }); err != nil {
		t.Fatal(err)
	}
	r := want(claim(sc, "fp", "e", t0.Add(2*time.Second)), xaalis.ClaimReplay)
	if r.Response.Status != 201 || string(r.Response.Body) != string(resp.Body) || r.Response.ContentType != resp.ContentType || r.Response.Location != "/v1/x" {
		t.Fatalf("replayed %+v", r.Response)
	}
	want(claim(sc, "other", "e", t0.Add(2*time.Second)), xaalis.ClaimConflict)
	// Completing twice fails: the claim is done.
	if err := s.CompleteIdempotency(ctx, sc, "a", resp); !errors.Is(err, xaalis.ErrClaimLost) {
		t.Fatalf("second completion: %v", err)
	}
	// 24 hours after first use the key is new again.
	want(claim(sc, "other", "f", t0.Add(xaalis.IdempotencyTTL)), xaalis.ClaimAcquired)

	// A holder that died: its lease runs out and a retry takes over; the
	// dead holder can then no longer complete.
	sc2 := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "k2"}
	want(claim(sc2, "fp", "g", t0), xaalis.ClaimAcquired)
	want(claim(sc2, "fp", "h", t0.Add(59*time.Second)), xaalis.ClaimInFlight)
	want(claim(sc2, "fp", "h", t0.Add(time.Minute)), xaalis.ClaimAcquired)
	err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CompleteIdempotency(ctx, sc2, "g", resp) })
	if !errors.Is(err, xaalis.ErrClaimLost) {
		t.Fatalf("dead holder completed: %v", err)
	}
	// Release forgets the claim (a 5xx): the retry runs.
	if err := s.ReleaseIdempotency(ctx, sc2, "h"); err != nil {
		t.Fatal(err)
	}
	want(claim(sc2, "fp2", "i", t0.Add(time.Minute)), xaalis.ClaimAcquired)
	// Releasing with the wrong token does nothing.
	if err := s.ReleaseIdempotency(ctx, sc2, "h"); err != nil {
		t.Fatal(err)
	}
	want(claim(sc2, "fp2", "j", t0.Add(time.Minute)), xaalis.ClaimInFlight)

	n, err := s.PurgeIdempotency(ctx, t0.Add(xaalis.IdempotencyTTL+2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// Expired: the live k1, m2's k1 and k2 (re-claimed at t0+1m). The test
	// k1, claimed anew at t0+24h, lives until t0+48h.
	if n != 3 {
		t.Fatalf("purged %d keys, want 3", n)
	}
	want(claim(sc, "third", "k", t0.Add(xaalis.IdempotencyTTL+3*time.Minute)), xaalis.ClaimConflict)
}

// testIdempotencyUnseen: a claim of a key its request found absent
// (Unseen) commits with its command like any other, in flight or done with
// the answer completed in the same transaction. One whose key another
// request took meanwhile never commits its command: the store refuses the
// claim (PostgreSQL claims at the start) or fails the command with
// ErrClaimRace (SQLite writes the key at the end), and the key stays the
// other request's.
func testIdempotencyUnseen(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	scope := func(key string) xaalis.IdempotencyScope {
		return xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: key}
	}
	unseen := func(sc xaalis.IdempotencyScope, token string) xaalis.Claim {
		c := claim(sc, "fp", token, t0)
		c.Unseen = true
		return c
	}
	// run claims c in a command that counts a rate (its own write) and,
	// with an answer, completes the key; it returns the command's error.
	// With fail, the command fails after its write, with its own error.
	errOwn := errors.New("the command's own error")
	var fail, failAfter bool
	run := func(c xaalis.Claim, answer *xaalis.StoredResponse) error {
		return s.Update(ctx, func(tx xaalis.Tx) error {
			r, err := tx.ClaimIdempotency(ctx, c)
			if err != nil {
				return err
			}
			if r.Outcome != xaalis.ClaimAcquired {
				return &xaalis.ClaimRefused{Result: r}
			}
			if _, err := tx.CountRate(ctx, "unseen:"+c.Scope.Key, t0); err != nil {
				return err
			}
			if fail {
				return errOwn
			}
			if answer != nil {
				if err := tx.CompleteIdempotency(ctx, c.Scope, c.Token, *answer); err != nil || !failAfter {
					return err
				}
				return errOwn // after its answer was stored (or queued)
			}
			return nil
		})
	}
	rate := func(key string) int {
		var n int
		if err := s.Update(ctx, func(tx xaalis.Tx) (err error) {
			n, err = tx.CountRate(ctx, "unseen:"+key, t0)
			return errors.Join(err, errors.New("roll back"))
		}); n == 0 {
			t.Fatalf("count rate: %v", err)
		}
		return n - 1
	}
	if err := run(unseen(scope("u1"), "a"), nil); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.IdempotencyKey(ctx, scope("u1")); err != nil || rec.Done || rec.Token != "a" {
		t.Fatalf("a command without its answer: %+v %v; want the key in flight, token a", rec, err)
	}
	resp := xaalis.StoredResponse{Status: 201, ContentType: "application/json", Location: "/v1/x/1", Body: []byte(`{"id":"1"}`)}
	if err := run(unseen(scope("u2"), "b"), &resp); err != nil {
		t.Fatal(err)
	}
	rec, err := s.IdempotencyKey(ctx, scope("u2"))
	if err != nil || !rec.Done || rec.Response == nil || rec.Response.Status != 201 || rec.Response.Location != resp.Location ||
		string(rec.Response.Body) != string(resp.Body) || !bytes.Equal(rec.Fingerprint, []byte("fp")) {
		t.Fatalf("a command with its answer: %+v %v", rec, err)
	}
	if r, err := s.ClaimIdempotency(ctx, claim(scope("u2"), "fp", "c", t0)); err != nil || r.Outcome != xaalis.ClaimReplay ||
		string(r.Response.Body) != string(resp.Body) {
		t.Fatalf("replay of the key written with its answer: %+v %v", r, err)
	}
	// A command that fails on its own, its key free, fails with its error
	// and leaves no key.
	fail = true
	if err := run(unseen(scope("u3"), "d"), nil); !errors.Is(err, errOwn) {
		t.Fatalf("a failing command: %v; want its own error", err)
	}
	if _, err := s.IdempotencyKey(ctx, scope("u3")); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("a failing command's key: %v; want none", err)
	}
	// Taken meanwhile: u1 is a's, in flight; u2 is done. A command that
	// then fails on its own (maybe for what the other request did) is
	// answered as the key is too.
	for _, tc := range []struct {
		key             string
		answer          *xaalis.StoredResponse
		fail, failAfter bool
	}{{"u1", nil, false, false}, {"u1", &resp, false, false}, {"u2", nil, false, false}, {"u2", &resp, false, false},
		{"u1", nil, true, false}, {"u2", &resp, true, false}, {"u1", &resp, false, true}, {"u2", &resp, false, true}} {
		fail, failAfter = tc.fail, tc.failAfter
		err := run(unseen(scope(tc.key), "late"), tc.answer)
		var refused *xaalis.ClaimRefused
		if !errors.Is(err, xaalis.ErrClaimRace) && !errors.As(err, &refused) {
			t.Fatalf("%s taken meanwhile (answer %v, failing %v): %v; want ErrClaimRace or a refused claim",
				tc.key, tc.answer != nil, tc.fail, err)
		}
	}
	// A free key whose command fails after storing its answer leaves no key.
	fail, failAfter = false, true
	if err := run(unseen(scope("u4"), "e"), &resp); !errors.Is(err, errOwn) {
		t.Fatalf("a command failing after its answer: %v; want its own error", err)
	}
	failAfter = false
	if _, err := s.IdempotencyKey(ctx, scope("u4")); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("the key of a command failing after its answer: %v; want none", err)
	}
	if n := rate("u1"); n != 1 {
		t.Fatalf("u1: %d commands committed, want 1", n)
	}
	if n := rate("u2"); n != 1 {
		t.Fatalf("u2: %d commands committed, want 1", n)
	}
	if rec, err := s.IdempotencyKey(ctx, scope("u1")); err != nil || rec.Done || rec.Token != "a" {
		t.Fatalf("u1 after the late claims: %+v %v", rec, err)
	}
	if rec, err := s.IdempotencyKey(ctx, scope("u2")); err != nil || !rec.Done || string(rec.Response.Body) != string(resp.Body) {
		t.Fatalf("u2 after the late claims: %+v %v", rec, err)
	}

	// The quota: a key that exists answers as itself even past the quota,
	// and the count stays exact (u1, u2 and u3's failed command: 2 keys
	// counted, none of them when no limit was asked; q1 below makes 1).
	quota := func(key string, limit int) xaalis.Claim {
		c := unseen(scope(key), "q-"+key)
		c.QuotaLimit, c.QuotaWindow = limit, time.Hour
		return c
	}
	if err := run(quota("q1", 1), &resp); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"q1", "u1"} {
		err := run(quota(key, 1), &resp)
		var refused *xaalis.ClaimRefused
		if !errors.Is(err, xaalis.ErrClaimRace) && !(errors.As(err, &refused) && refused.Result.Outcome != xaalis.ClaimQuotaExceeded) {
			t.Fatalf("%s past the quota: %v; want it answered as the key it is, not 429", key, err)
		}
	}
	var refused *xaalis.ClaimRefused
	if err := run(quota("q2", 1), &resp); !errors.As(err, &refused) || refused.Result.Outcome != xaalis.ClaimQuotaExceeded {
		t.Fatalf("a new key past the quota: %v", err)
	}
	if err := run(quota("q2", 2), &resp); err != nil {
		t.Fatalf("a new key within the quota: %v", err)
	}
	if err := run(quota("q3", 2), &resp); !errors.As(err, &refused) || refused.Result.Outcome != xaalis.ClaimQuotaExceeded {
		t.Fatalf("the third key with a quota of 2: %v", err)
	}

	// Commands at once (SQLite runs them in one batch, each in its
	// savepoint): the late ones fail, the new ones commit.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprint("c", i)
			if i%2 == 1 {
				key = []string{"u1", "u2"}[i%4/2]
			}
			errs[i] = run(unseen(scope(key), fmt.Sprint("late-", i)), &resp)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var refused *xaalis.ClaimRefused
		switch {
		case i%2 == 0 && err != nil:
			t.Errorf("new key c%d at once: %v", i, err)
		case i%2 == 1 && !errors.Is(err, xaalis.ErrClaimRace) && !errors.As(err, &refused):
			t.Errorf("taken key at once (%d): %v", i, err)
		}
	}
	for i := 0; i < len(errs); i += 2 {
		if n := rate(fmt.Sprint("c", i)); n != 1 {
			t.Errorf("c%d: %d commands committed, want 1", i, n)
		}
	}
	if rate("u1") != 1 || rate("u2") != 1 {
		t.Errorf("taken keys: u1 %d, u2 %d commands committed, want 1 each", rate("u1"), rate("u2"))
	}
}

// testClaimWrittenOnce: a command done in one transaction writes the
// Idempotency-Key its request found absent (Claim.Unseen) in one
// statement, one fewer than a key claimed at the start (an INSERT in
// flight, then an UPDATE with the answer), and the two keys read the same.
func testClaimWrittenOnce(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	resp := xaalis.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte(`{"id":"1"}`)}
	now := time.Now()
	stats, ok := s.(xaalis.StatsReporter)
	if !ok {
		t.Fatalf("%T counts no statements", s)
	}
	// cost runs the command and returns the statements it sent: the least
	// of three tries, as the counter is the process's.
	cost := func(unseen bool) int64 {
		least := int64(-1)
		for i := range 3 {
			key := fmt.Sprint(unseen, i)
			c := xaalis.Claim{Scope: xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: key},
				Fingerprint: []byte("fp"), Token: "t-" + key, Now: now, Lease: time.Minute, Unseen: unseen}
			before := stats.Stats().Statements
			if err := s.Update(ctx, func(tx xaalis.Tx) error {
				if r, err := tx.ClaimIdempotency(ctx, c); err != nil || r.Outcome != xaalis.ClaimAcquired {
					return errors.Join(err, fmt.Errorf("claim: %+v", r))
				}
				return tx.CompleteIdempotency(ctx, c.Scope, c.Token, resp)
			}); err != nil {
				t.Fatal(err)
			}
			if n := stats.Stats().Statements - before; least < 0 || n < least {
				least = n
			}
			rec, err := s.IdempotencyKey(ctx, c.Scope)
			if err != nil || !rec.Done || rec.Token != c.Token || string(rec.Response.Body) != string(resp.Body) ||
				!rec.ExpiresAt.Equal(now.Add(xaalis.IdempotencyTTL).Truncate(time.Microsecond)) {
				t.Fatalf("key %s: %+v %v", key, rec, err)
			}
		}
		return least
	}
	atStart, once := cost(false), cost(true)
	if atStart-once != 1 {
		t.Fatalf("statements: %d with the key claimed at the start, %d with it written once; want one fewer", atStart, once)
	}
}

func testIdempotencyConcurrent(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	sc := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "race"}
	var acquired, inflight atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.ClaimIdempotency(ctx, claim(sc, "fp", fmt.Sprint(i), t0))
			if err != nil {
				t.Error(err)
				return
			}
			switch r.Outcome {
			case xaalis.ClaimAcquired:
				acquired.Add(1)
			case xaalis.ClaimInFlight:
				inflight.Add(1)
			default:
				t.Errorf("outcome %d", r.Outcome)
			}
		}()
	}
	wg.Wait()
	if acquired.Load() != 1 || inflight.Load() != 15 {
		t.Fatalf("acquired %d, in flight %d; want 1 and 15", acquired.Load(), inflight.Load())
	}
}

func testQuota(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	now := t0.Add(10 * time.Minute)
	c := func(key string, at time.Time) xaalis.ClaimResult {
		t.Helper()
		cl := claim(xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: key}, "fp", key, at)
		cl.QuotaLimit, cl.QuotaWindow = 3, time.Hour
		r, err := s.ClaimIdempotency(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := range 3 {
		if r := c(fmt.Sprint(i), now); r.Outcome != xaalis.ClaimAcquired {
			t.Fatalf("key %d: outcome %d", i, r.Outcome)
		}
	}
	r := c("3", now)
	if r.Outcome != xaalis.ClaimQuotaExceeded || r.RetryAfter != 50*time.Minute {
		t.Fatalf("4th key: %+v, want quota exceeded with 50m retry", r)
	}
	// Refused keys are not counted, and seen keys are not new keys.
	if r := c("3", now); r.Outcome != xaalis.ClaimQuotaExceeded {
		t.Fatalf("retry of refused key: %+v", r)
	}
	if r := c("0", now); r.Outcome != xaalis.ClaimInFlight {
		t.Fatalf("seen key: %+v", r)
	}
	if r := c("3", t0.Add(time.Hour)); r.Outcome != xaalis.ClaimAcquired {
		t.Fatalf("next window: %+v", r)
	}

	// Keys claimed at once: a small quota is exact under any concurrency.
	race := func(limit, workers, attempts int, at time.Time) int {
		var acquired atomic.Int64
		var next atomic.Int64
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := next.Add(1)
					if i > int64(attempts) {
						return
					}
					key := fmt.Sprintf("race-%d-%d", limit, i)
					cl := claim(xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: key}, "fp", key, at)
					cl.QuotaLimit, cl.QuotaWindow = limit, time.Hour
					r, err := s.ClaimIdempotency(ctx, cl)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Outcome == xaalis.ClaimAcquired {
						acquired.Add(1)
					} else if r.Outcome != xaalis.ClaimQuotaExceeded {
						t.Errorf("key %s: outcome %d", key, r.Outcome)
					}
				}
			}()
		}
		wg.Wait()
		return int(acquired.Load())
	}
	if n := race(5, 20, 40, t0.Add(2*time.Hour)); n != 5 {
		t.Fatalf("20 claimers at once under a quota of 5: %d keys acquired", n)
	}
	// A quota of thousands is counted in shards: claimers at once may pass
	// it by as many as are in flight together, never more; then it holds.
	const big, workers = 1024, 8
	if n := race(big, workers, big+100, t0.Add(3*time.Hour)); n < big || n > big+workers {
		t.Fatalf("a quota of %d with %d claimers at once: %d keys acquired", big, workers, n)
	}
	cl := claim(xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "after"}, "fp", "after", t0.Add(3*time.Hour))
	cl.QuotaLimit, cl.QuotaWindow = big, time.Hour
	if r, err := s.ClaimIdempotency(ctx, cl); err != nil || r.Outcome != xaalis.ClaimQuotaExceeded {
		t.Fatalf("a key after the quota was spent: %+v %v", r, err)
	}
}

func testPlan(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	var ids []string
	for i := range 5 {
		mode := xaalis.ModeTest
		if i == 4 {
			mode = xaalis.ModeLive
		}
		p := &xaalis.Plan{ID: xaalis.NewUUIDv7(), MerchantID: m.ID, Mode: mode, Name: fmt.Sprint("plan ", i),
			Amount: xaalis.Units(5000, xaalis.XOF), Interval: xaalis.IntervalMonth, IntervalCount: 1, TermCount: 12 * i, Active: true,
			Metadata: map[string]string{"tier": "gold"}, CreatedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0}
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreatePlan(ctx, p) }); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.ID)
	}
	got, err := s.Plan(ctx, m.ID, ids[0])
	if err != nil || got.Amount.Minor != 500000 || got.Metadata["tier"] != "gold" || got.Interval != xaalis.IntervalMonth || got.TermCount != 0 {
		t.Fatalf("plan = %+v, %v", got, err)
	}
	if got, err := s.Plan(ctx, m.ID, ids[2]); err != nil || got.TermCount != 24 {
		t.Fatalf("plan with a term = %+v, %v", got, err)
	}
	other := NewMerchant(t, s)
	if _, err := s.Plan(ctx, other.ID, ids[0]); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("another merchant's plan: %v", err)
	}
	page, total, err := s.Plans(ctx, xaalis.PlanFilter{MerchantID: m.ID, Mode: xaalis.ModeTest}, xaalis.PageRequest{Page: 1, PerPage: 3})
	if err != nil || total != 4 || len(page) != 3 || page[0].ID != ids[3] || page[2].ID != ids[1] {
		t.Fatalf("page 1: total %d, %d plans, err %v", total, len(page), err)
	}
	page, _, _ = s.Plans(ctx, xaalis.PlanFilter{MerchantID: m.ID, Mode: xaalis.ModeTest}, xaalis.PageRequest{Page: 2, PerPage: 3})
	if len(page) != 1 || page[0].ID != ids[0] {
		t.Fatalf("page 2: %d plans", len(page))
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error {
		p, err := tx.PlanForUpdate(ctx, m.ID, ids[0])
		if err != nil {
			return err
		}
		p.Active = false
		p.UpdatedAt = t0.Add(time.Hour)
		return tx.UpdatePlan(ctx, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = s.Plan(ctx, m.ID, ids[0])
	if got.Active || !got.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Fatalf("deactivated plan = %+v", got)
	}
	for _, c := range []struct {
		active bool
		n      int
	}{{true, 3}, {false, 1}} {
		page, total, err := s.Plans(ctx, xaalis.PlanFilter{MerchantID: m.ID, Mode: xaalis.ModeTest, Active: &c.active}, xaalis.PageRequest{Page: 1, PerPage: 10})
		if err != nil || total != c.n || len(page) != c.n {
			t.Fatalf("active=%v: total %d, %d plans, %v", c.active, total, len(page), err)
		}
		for _, p := range page {
			if p.Active != c.active {
				t.Fatalf("active=%v lists %+v", c.active, p)
			}
		}
	}
}

func testInstances(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	a := &xaalis.Instance{ID: xaalis.NewUUIDv7(), Host: "h1", PID: 100, Process: "p1", StartedAt: t0, HeartbeatAt: t0}
	b := &xaalis.Instance{ID: xaalis.NewUUIDv7(), Host: "h2", PID: 200, Process: "p2", StartedAt: t0.Add(time.Second), HeartbeatAt: t0.Add(time.Second)}
	for _, i := range []*xaalis.Instance{a, b} {
		if err := s.RegisterInstance(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.HeartbeatInstance(ctx, a.ID, t0.Add(5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.HeartbeatInstance(ctx, "nobody", t0); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("heartbeat of an unknown instance: %v", err)
	}
	list, err := s.Instances(ctx)
	if err != nil || len(list) != 2 {
		t.Fatalf("instances %v %v", list, err)
	}
	if got := list[0]; got.ID != a.ID || got.Host != "h1" || got.PID != 100 || got.Process != "p1" ||
		!got.StartedAt.Equal(t0) || !got.HeartbeatAt.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("instance a read back as %+v", got)
	}
	if err := s.RemoveInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.HeartbeatInstance(ctx, a.ID, t0); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("heartbeat of a removed instance: %v", err)
	}
	// Registering again renews the row.
	a.HeartbeatAt = t0.Add(time.Minute)
	if err := s.RegisterInstance(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterInstance(ctx, a); err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Instances(ctx); len(list) != 2 {
		t.Fatalf("after re-registering: %v", list)
	}
}

// testIdempotencyOwner: a claim belongs to an instance; it is in flight
// while the instance lives, and a retry with the same request takes it
// over at once when the instance is gone: its row removed, its heartbeat
// older than OwnerStale, or, for the claimant's own instance, no request
// of it running the claim.
func testIdempotencyOwner(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	a := &xaalis.Instance{ID: xaalis.NewUUIDv7(), Host: "h", PID: 1, Process: "a", StartedAt: t0, HeartbeatAt: t0}
	b := &xaalis.Instance{ID: xaalis.NewUUIDv7(), Host: "h", PID: 2, Process: "b", StartedAt: t0, HeartbeatAt: t0}
	for _, i := range []*xaalis.Instance{a, b} {
		if err := s.RegisterInstance(ctx, i); err != nil {
			t.Fatal(err)
		}
	}
	stale := 6 * time.Second
	running := map[string]bool{}
	by := func(inst *xaalis.Instance, key, fp, token string, at time.Time) xaalis.Claim {
		c := claim(xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: key}, fp, token, at)
		c.Instance, c.OwnerStale = inst.ID, stale
		c.Running = func(tok string) bool { return running[tok] }
		return c
	}
	want := func(c xaalis.Claim, o xaalis.ClaimOutcome) {
		t.Helper()
		r, err := s.ClaimIdempotency(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != o {
			t.Fatalf("claim %q of %s at %v: outcome %d, want %d", c.Token, c.Scope.Key, c.Now.Sub(t0), r.Outcome, o)
		}
		if o == xaalis.ClaimAcquired {
			running[c.Token] = true
		}
		// The read answers as the claim does.
		rec, err := s.IdempotencyKey(ctx, c.Scope)
		if err != nil {
			t.Fatal(err)
		}
		if o != xaalis.ClaimAcquired {
			if got := rec.Outcome(c); got.Outcome != o {
				t.Fatalf("read of %s: outcome %d, want %d", c.Scope.Key, got.Outcome, o)
			}
		}
	}

	// A lives: in flight, even past the lease of a claimant without an
	// instance; a different request is a conflict.
	want(by(a, "o1", "fp", "a1", t0), xaalis.ClaimAcquired)
	want(by(b, "o1", "fp", "b1", t0.Add(time.Second)), xaalis.ClaimInFlight)
	want(by(b, "o1", "other", "b1", t0.Add(time.Second)), xaalis.ClaimConflict)
	if err := s.HeartbeatInstance(ctx, a.ID, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want(by(b, "o1", "fp", "b1", t0.Add(2*time.Minute+time.Second)), xaalis.ClaimInFlight)
	// A's heartbeat ages past OwnerStale: B takes over, and A can no
	// longer complete.
	want(by(b, "o1", "fp", "b2", t0.Add(2*time.Minute+stale)), xaalis.ClaimAcquired)
	resp := xaalis.StoredResponse{Status: 201, ContentType: "application/json", Body: []byte("{}\n")}
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		return tx.CompleteIdempotency(ctx, xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "o1"}, "a1", resp)
	}); !errors.Is(err, xaalis.ErrClaimLost) {
		t.Fatalf("the old owner completed: %v", err)
	}
	// The new owner is B, alive: A's retry now waits for B.
	if err := s.HeartbeatInstance(ctx, b.ID, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.HeartbeatInstance(ctx, a.ID, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want(by(a, "o1", "fp", "a2", t0.Add(3*time.Minute)), xaalis.ClaimInFlight)

	// B shuts down (its row removed): a retry takes over at once.
	want(by(b, "o2", "fp", "b3", t0.Add(3*time.Minute)), xaalis.ClaimAcquired)
	want(by(a, "o2", "fp", "a3", t0.Add(3*time.Minute)), xaalis.ClaimInFlight)
	if err := s.RemoveInstance(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	want(by(a, "o2", "fp", "a3", t0.Add(3*time.Minute)), xaalis.ClaimAcquired)

	// A claim of A's own that none of its requests runs (its release
	// failed) is taken over by A at once; one that runs is in flight.
	want(by(a, "o3", "fp", "a4", t0.Add(3*time.Minute)), xaalis.ClaimAcquired)
	want(by(a, "o3", "fp", "a5", t0.Add(3*time.Minute)), xaalis.ClaimInFlight)
	running["a4"] = false
	want(by(a, "o3", "fp", "a5", t0.Add(3*time.Minute)), xaalis.ClaimAcquired)

	// Completed keys replay whatever became of their owner.
	if err := s.CompleteIdempotency(ctx, xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "o3"}, "a5", resp); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveInstance(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	want(by(b, "o3", "fp", "b4", t0.Add(3*time.Minute)), xaalis.ClaimReplay)
}
