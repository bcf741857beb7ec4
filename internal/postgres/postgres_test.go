package postgres_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

func openURL(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
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
	want := []string{"api_keys", "customers", "disputes", "events", "goose_db_version", "idempotency_keys",
		"idempotency_quota", "ledger_balances", "ledger_entries", "ledger_postings", "merchants", "operator_tokens",
		"payout_requests", "plans", "provider_notifications", "settings", "split_items", "subscriptions", "transactions", "volume_counters",
		"webhook_attempts", "webhook_callback_secrets", "webhook_deliveries", "webhook_endpoints"}
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
				Scope:       xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, Key: fmt.Sprint(i)},
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
