package postgres_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func openURL(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.SetSecretBox(testutil.SharedKeyring(t))
	return s
}

func open(t *testing.T) xaalis.Store { return openURL(t, pgtest.URL(t)) }

func TestStore(t *testing.T) { storetest.Run(t, open) }

// TestMigrateConcurrently opens one schema from several stores at once,
// as server processes starting together do: the advisory lock makes them
// take turns, and the later ones find the migrations applied.
func TestMigrateConcurrently(t *testing.T) {
	url := pgtest.URL(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s, err := postgres.Open(context.Background(), url)
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		})
	}
	wg.Wait()
	s := openURL(t, url) // and reopening is a no-op
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSearchPath checks that every table, goose's included, lives in the
// schema the URL names.
func TestSearchPath(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	openURL(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"api_keys", "audit_log", "customers", "disputes", "events", "goose_db_version", "idempotency_keys",
		"idempotency_quota", "late_polls", "ledger_balances", "ledger_checks", "ledger_entries", "ledger_postings", "merchants",
		"operator_sessions", "operator_tokens", "payout_requests", "plans", "provider_notifications", "rate_counters",
		"server_instances", "settings", "split_items", "stat_counters", "subscriptions", "transaction_counts", "transactions", "volume_counters",
		"webhook_attempts", "webhook_callback_secrets", "webhook_deliveries", "webhook_endpoints", "webhook_listen_secrets"}
	if len(tables) != len(want) {
		t.Fatalf("tables %v, want %v", tables, want)
	}
	for i := range want {
		if tables[i] != want[i] {
			t.Fatalf("tables %v, want %v", tables, want)
		}
	}
}

// TestQuotaConcurrent claims many new keys at once against a quota: the
// counter upsert lets exactly the limit through.
func TestQuotaConcurrent(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	now := time.Date(2026, 11, 21, 10, 10, 0, 0, time.UTC)
	var acquired, refused atomic.Int32
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			r, err := s.ClaimIdempotency(ctx, xaalis.Claim{
				Scope:       xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: fmt.Sprint(i)},
				Fingerprint: []byte("fp"), Token: fmt.Sprint(i), Now: now, Lease: time.Minute,
				QuotaLimit: 5, QuotaWindow: time.Hour,
			})
			if err != nil {
				t.Error(err)
				return
			}
			switch r.Outcome {
			case xaalis.ClaimAcquired:
				acquired.Add(1)
			case xaalis.ClaimQuotaExceeded:
				refused.Add(1)
			default:
				t.Errorf("outcome %d", r.Outcome)
			}
		})
	}
	wg.Wait()
	if acquired.Load() != 5 || refused.Load() != 7 {
		t.Fatalf("acquired %d, refused %d; want 5 and 7", acquired.Load(), refused.Load())
	}
}

// TestAllowIPs stores prefixes in cidr[] columns: host bits are masked
// away and an IPv4-mapped address keeps its IPv6 form.
func TestAllowIPs(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	m := storetest.NewMerchant(t, s)
	ips := []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8"), netip.MustParsePrefix("::ffff:192.0.2.1/128")}
	err := s.Update(ctx, func(tx xaalis.Tx) error {
		m.AllowIPs = ips
		return tx.UpdateMerchant(ctx, m)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Merchant(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.AllowIPs) != 2 || got.AllowIPs[0].String() != "10.0.0.0/8" || got.AllowIPs[1] != ips[1] {
		t.Fatalf("allow_ips = %v", got.AllowIPs)
	}
	if got.AllowedProviders != nil {
		t.Fatalf("allowed_providers = %#v, want nil", got.AllowedProviders)
	}
}

// TestLedgerCorruption changes the ledger through a connection of its own
// to the same schema: CheckLedger finds every difference.
func TestLedgerCorruption(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	s := openURL(t, url)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	storetest.LedgerCorruption(t, s, func(q string) error {
		_, err := conn.Exec(ctx, q)
		return err
	})
}

// TestClaimDeliveriesTwoStores claims deliveries from two stores on one
// schema at once, as two server processes do: SKIP LOCKED gives each
// delivery to exactly one claimer.
func TestClaimDeliveriesTwoStores(t *testing.T) {
	url := pgtest.URL(t)
	storetest.ConcurrentClaims(t, openURL(t, url), openURL(t, url))
}

// TestWakeAcrossProcesses: a commit in one process wakes the dispatcher of
// another on the same database (NOTIFY at commit, LISTEN in each store).
func TestWakeAcrossProcesses(t *testing.T) {
	url := pgtest.URL(t)
	a, b := openURL(t, url), openURL(t, url)
	wake := a.Subscribe(xaalis.WakeDeliveries)
	// The listener signals once when it connects: wait for that.
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never connected")
	}
	ctx := context.Background()
	if err := b.Update(ctx, func(tx xaalis.Tx) error { tx.Wake(xaalis.WakeDeliveries); return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit in another process did not wake this one")
	}
}

// TestMigrateDebtFold: a database an older release left with a chargeback
// debt apart is migrated so that the debt is carried in available.
func TestMigrateDebtFold(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	if err := postgres.MigrateTo(ctx, url, 11); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := storetest.DebtFoldRows
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	epoch := time.Unix(0, 0).UTC()
	exec(`INSERT INTO merchants (id, name, country, settlement_currency, status, kyc, created_at, updated_at)
		VALUES ($1, 'Old', 'SN', 'XOF', 'active', 'approved', $2, $2)`, storetest.DebtFoldMerchant, epoch)
	for _, e := range rows.Entries {
		exec(`INSERT INTO ledger_entries (id, mode, merchant_id, kind, ref_type, ref_id, created_at)
			VALUES ($1, 'test', $2, $3, 'transaction', $1, $4)`, e[0], storetest.DebtFoldMerchant, e[1], epoch)
	}
	for _, p := range rows.Postings {
		exec(`INSERT INTO ledger_postings (entry_id, line, account, currency, amount) VALUES ($1, $2, $3, 'XOF', $4)`,
			p.Entry, p.Line, p.Account, p.Amount)
	}
	for _, b := range rows.Balances {
		exec(`INSERT INTO ledger_balances (account, currency, balance, non_negative, updated_at) VALUES ($1, 'XOF', $2, $3, $4)`,
			b.Account, b.Balance, b.NonNegative, epoch)
	}
	storetest.CheckDebtFold(t, openURL(t, url))
}

// TestPoolTooSmall: one connection of the pool listens for wake-ups, so a
// pool of one could run nothing; Open says so instead of hanging.
func TestPoolTooSmall(t *testing.T) {
	u := pgtest.URL(t)
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	_, err := postgres.Open(context.Background(), u+sep+"pool_max_conns=1")
	if err == nil || !strings.Contains(err.Error(), "at least 2") {
		t.Fatalf("pool_max_conns=1: %v", err)
	}
}

// TestWakeBySchema: wake-ups reach the processes of one installation (one
// schema), and only them. NOTIFY channels are database-wide: with one
// channel for all, a commit in another schema of the same database (another
// installation, a parallel test) woke this one's dispatcher.
func TestWakeBySchema(t *testing.T) {
	ctx := context.Background()
	url := pgtest.URL(t)
	a, same, other := openURL(t, url), openURL(t, url), openURL(t, pgtest.URL(t))
	sameC, otherC := same.Subscribe(xaalis.WakeDeliveries), other.Subscribe(xaalis.WakeDeliveries)
	storetest.DrainWakes(sameC)
	storetest.DrainWakes(otherC)
	if err := a.Update(ctx, func(tx xaalis.Tx) error { tx.Wake(xaalis.WakeDeliveries); return nil }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sameC:
	case <-time.After(10 * time.Second):
		t.Fatal("a commit did not wake another process on the same schema")
	}
	select {
	case <-otherC:
		t.Fatal("a commit woke a store on another schema of the database")
	case <-time.After(500 * time.Millisecond):
	}
}
