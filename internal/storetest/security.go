package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// testMerchantRefPerKeyType: a payment made with a publishable key has a
// merchant_ref namespace of its own, so it can never take (or resume) the
// secret key's order number; within one key type merchant_ref is unique.
func testMerchantRefPerKeyType(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	pub := NewPayment(m, xaalis.ModeTest, "order-1002", t0)
	pub.KeyType = xaalis.KeyPublishable
	insertTx(t, s, pub)
	sec := NewPayment(m, xaalis.ModeTest, "order-1002", t0.Add(time.Second))
	insertTx(t, s, sec)
	if got, err := s.Transaction(ctx, m.ID, sec.ID); err != nil || got.KeyType != xaalis.KeySecret {
		t.Fatalf("secret payment: %+v, %v", got, err)
	}
	if got, err := s.Transaction(ctx, m.ID, pub.ID); err != nil || got.KeyType != xaalis.KeyPublishable || !got.Publishable() {
		t.Fatalf("publishable payment: %+v, %v", got, err)
	}
	dup := NewPayment(m, xaalis.ModeTest, "order-1002", t0)
	dup.KeyType = xaalis.KeyPublishable
	err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertTransaction(ctx, dup) })
	if !errors.Is(err, xaalis.ErrDuplicateMerchantRef) {
		t.Fatalf("a second publishable order-1002: %v", err)
	}
	for _, c := range []struct {
		kt   xaalis.KeyType
		want string
	}{{xaalis.KeySecret, sec.ID}, {xaalis.KeyPublishable, pub.ID}} {
		if err := s.Update(ctx, func(tx xaalis.Tx) error {
			got, err := tx.TransactionByMerchantRefForUpdate(ctx, m.ID, xaalis.ModeTest, c.kt, "order-1002")
			if err != nil || got.ID != c.want {
				t.Errorf("%s: %+v, %v", c.kt, got, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	// The key type is part of the record's identity: an update keeps it.
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		x, err := tx.TransactionForUpdate(ctx, pub.ID)
		if err != nil {
			return err
		}
		x.KeyType, x.Status = xaalis.KeySecret, xaalis.StatusCancelled
		return tx.UpdateTransaction(ctx, x)
	}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Transaction(ctx, m.ID, pub.ID); got.KeyType != xaalis.KeyPublishable {
		t.Fatalf("an update changed the key type to %q", got.KeyType)
	}
}

// testIdempotencyKeyType: secret and publishable keys of one merchant and
// mode hold the same Idempotency-Key apart, and count their own quotas.
func testIdempotencyKeyType(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	sec := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "same"}
	pub := sec
	pub.KeyType = xaalis.KeyPublishable
	cl := func(sc xaalis.IdempotencyScope, token string, limit int) xaalis.ClaimOutcome {
		t.Helper()
		c := claim(sc, "fp", token, t0)
		c.QuotaLimit, c.QuotaWindow = limit, time.Hour
		r, err := s.ClaimIdempotency(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return r.Outcome
	}
	if o := cl(sec, "a", 0); o != xaalis.ClaimAcquired {
		t.Fatalf("secret claim: %v", o)
	}
	if err := s.CompleteIdempotency(ctx, sec, "a", xaalis.StoredResponse{Status: 201, Body: []byte(`{"secret":true}`)}); err != nil {
		t.Fatal(err)
	}
	// The same key and body from a publishable key is a new request.
	if o := cl(pub, "b", 0); o != xaalis.ClaimAcquired {
		t.Fatalf("publishable claim of the secret key's Idempotency-Key: %v, want acquired", o)
	}
	if o := cl(sec, "c", 0); o != xaalis.ClaimReplay {
		t.Fatalf("secret replay: %v", o)
	}
	// Quotas: two new publishable keys fill a publishable quota of 2; the
	// secret quota is untouched.
	for i, k := range []string{"p1", "p2", "p3"} {
		sc := pub
		sc.Key = k
		want := xaalis.ClaimAcquired
		if i == 2 {
			want = xaalis.ClaimQuotaExceeded
		}
		if o := cl(sc, k, 2); o != want {
			t.Fatalf("publishable key %s: %v, want %v", k, o, want)
		}
	}
	sc := sec
	sc.Key = "s1"
	if o := cl(sc, "s1", 2); o != xaalis.ClaimAcquired {
		t.Fatalf("secret key after the publishable quota is spent: %v", o)
	}
}

// testOperatorTokenLifecycle: tokens list newest first, carry an expiry,
// and are revoked in place.
func testOperatorTokenLifecycle(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	hash := func(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }
	exp := t0.Add(24 * time.Hour)
	a := &xaalis.OperatorToken{ID: xaalis.NewUUIDv7(), Name: "first", Hash: hash("x1"), CreatedAt: t0, ExpiresAt: &exp}
	b := &xaalis.OperatorToken{ID: xaalis.NewUUIDv7(), Name: "second", Hash: hash("x2"), CreatedAt: t0.Add(time.Minute)}
	for _, o := range []*xaalis.OperatorToken{a, b} {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertOperatorToken(ctx, o) }); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.OperatorTokens(ctx)
	if err != nil || len(list) != 2 || list[0].ID != b.ID || !reflect.DeepEqual(list[1], a) {
		t.Fatalf("list: %+v, %v", list, err)
	}
	at := t0.Add(time.Hour)
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		got, err := tx.OperatorTokenForUpdate(ctx, a.ID)
		if err != nil || got.Name != "first" {
			t.Errorf("for update: %+v, %v", got, err)
		}
		return tx.RevokeOperatorToken(ctx, a.ID, at)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.OperatorTokenByHash(ctx, a.Hash)
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(at) || got.Usable(t0) {
		t.Fatalf("revoked: %+v, %v", got, err)
	}
	err = s.Update(ctx, func(tx xaalis.Tx) error { return tx.RevokeOperatorToken(ctx, "nope", at) })
	if !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	if !b.Usable(t0.Add(1000*time.Hour)) || a.Usable(exp) {
		t.Fatal("Usable ignores the expiry")
	}
}

// testAuditLog: entries list newest first and can be neither changed nor
// deleted.
func testAuditLog(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	for i, act := range []string{"merchant.update", "payout_request.approve"} {
		e := &xaalis.AuditEntry{ID: xaalis.NewUUIDv7(), At: t0.Add(time.Duration(i) * time.Minute), Actor: "ops",
			TokenID: "tok-1", Action: act, ObjectType: "merchant", ObjectID: "m-1",
			Before: json.RawMessage(`{"status":"active"}`), After: json.RawMessage(`{"status":"suspended"}`), RequestID: "req_1",
			ClientIP: "203.0.113.7", Note: "asked by the merchant\non the phone"}
		if i == 1 {
			e.Before, e.ClientIP, e.Note = nil, "", ""
		}
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertAudit(ctx, e) }); err != nil {
			t.Fatal(err)
		}
	}
	list, total, err := s.AuditLog(ctx, xaalis.PageRequest{Page: 1, PerPage: 10})
	if err != nil || total != 2 || len(list) != 2 || list[0].Action != "payout_request.approve" {
		t.Fatalf("audit log: %d %+v %v", total, list, err)
	}
	var before, after map[string]string
	if list[0].Before != nil || json.Unmarshal(list[1].Before, &before) != nil || before["status"] != "active" ||
		json.Unmarshal(list[1].After, &after) != nil || after["status"] != "suspended" || list[1].TokenID != "tok-1" ||
		list[1].RequestID != "req_1" || !list[1].At.Equal(t0) || list[1].ClientIP != "203.0.113.7" || list[0].ClientIP != "" ||
		list[1].Note != "asked by the merchant\non the phone" || list[0].Note != "" {
		t.Fatalf("entry: %+v", list[1])
	}
	if list, total, _ := s.AuditLog(ctx, xaalis.PageRequest{Page: 3, PerPage: 1}); total != 2 || len(list) != 0 {
		t.Fatalf("past the last page: %d %v", total, list)
	}
	// The table refuses changes: the log is append-only.
	for _, stmt := range []string{"UPDATE audit_log SET actor = 'someone else'", "DELETE FROM audit_log"} {
		if err := ExecRaw(t, s, stmt); err == nil {
			t.Errorf("%s: allowed", stmt)
		}
	}
	if _, total, _ := s.AuditLog(ctx, xaalis.PageRequest{Page: 1, PerPage: 10}); total != 2 {
		t.Fatalf("after refused changes: %d entries", total)
	}
}

// Raw is a store that runs a raw SQL statement in a write transaction, for
// tests of database-level guarantees.
type Raw interface {
	ExecRaw(ctx context.Context, stmt string) error
}

// ExecRaw runs stmt through s when it can.
func ExecRaw(t *testing.T, s xaalis.Store, stmt string) error {
	t.Helper()
	r, ok := s.(Raw)
	if !ok {
		t.Fatalf("%T cannot run raw statements", s)
	}
	return r.ExecRaw(context.Background(), stmt)
}

// testRateCounter: counts add up across concurrent transactions, per
// scope and window; a rolled-back count is not kept.
func testRateCounter(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Update(ctx, func(tx xaalis.Tx) error { _, err := tx.CountRate(ctx, "ip:1", t0); return err }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	count := func(scope string, w time.Time) int {
		var n int
		if err := s.Update(ctx, func(tx xaalis.Tx) (err error) { n, err = tx.CountRate(ctx, scope, w); return err }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count("ip:1", t0); n != 21 {
		t.Fatalf("after 20 concurrent counts, the next is %d, want 21", n)
	}
	if n := count("ip:1", t0.Add(time.Minute)); n != 1 {
		t.Fatalf("a new window starts at %d", n)
	}
	if n := count("ip:2", t0); n != 1 {
		t.Fatalf("another scope starts at %d", n)
	}
	_ = s.Update(ctx, func(tx xaalis.Tx) error {
		if _, err := tx.CountRate(ctx, "ip:3", t0); err != nil {
			return err
		}
		return errors.New("roll back")
	})
	if n := count("ip:3", t0); n != 1 {
		t.Fatalf("a rolled-back count was kept: %d", n)
	}
	// Purging forgets windows older than a day.
	if _, err := s.PurgeIdempotency(ctx, t0.Add(25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := count("ip:1", t0); n != 1 {
		t.Fatalf("a purged window still counts: %d", n)
	}
}

// testReturnHosts: a merchant's return hosts are kept and changed.
func testReturnHosts(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	if m.ReturnHosts != nil {
		t.Fatalf("a new merchant has return hosts %v", m.ReturnHosts)
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		x, err := tx.MerchantForUpdate(ctx, m.ID)
		if err != nil {
			return err
		}
		x.ReturnHosts = []string{"shop.example", "pay.shop.example"}
		return tx.UpdateMerchant(ctx, x)
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Merchant(ctx, m.ID)
	if err != nil || !reflect.DeepEqual(got.ReturnHosts, []string{"shop.example", "pay.shop.example"}) {
		t.Fatalf("return hosts: %v, %v", got.ReturnHosts, err)
	}
	if !got.ReturnHostAllowed("https://SHOP.example:8443/ok?x=1") || got.ReturnHostAllowed("https://evil.example/shop.example") ||
		got.ReturnHostAllowed("https://shop.example.evil.example/") {
		t.Fatal("ReturnHostAllowed matched wrongly")
	}
}

// DrainWakes takes the wake-ups c holds until none comes for 300 ms: a
// listener signals once when it (re)connects, and a test of wake-ups
// starts after that.
func DrainWakes(c <-chan struct{}) {
	for {
		select {
		case <-c:
		case <-time.After(300 * time.Millisecond):
			return
		}
	}
}

// testWake: a commit that asked for a wake-up wakes the subscribers of that
// kind, once the commit is durable; a rolled-back one, or one that asked for
// none, does not.
func testWake(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	deliveries := s.Subscribe(xaalis.WakeDeliveries)
	// A listener may signal once when it (re)connects.
	DrainWakes(deliveries)
	_ = s.Update(ctx, func(tx xaalis.Tx) error {
		tx.Wake(xaalis.WakeDeliveries)
		return errors.New("roll back")
	})
	select {
	case <-deliveries:
		t.Fatal("a rolled-back transaction woke the dispatcher")
	case <-time.After(500 * time.Millisecond):
	}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { tx.Wake(xaalis.WakeDeliveries); return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deliveries:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit did not wake the dispatcher")
	}
	// A commit that asks for no wake-up wakes nobody.
	DrainWakes(deliveries)
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-deliveries:
		t.Fatal("a commit without a wake-up woke the dispatcher")
	case <-time.After(300 * time.Millisecond):
	}
}
