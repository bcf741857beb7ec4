package metrics_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xaalis/xaalis/internal/metrics"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestCollectorDatabaseDown: when the database cannot be read, a scrape
// reports the error and still carries the process's series.
func TestCollectorDatabaseDown(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	app := xaalis.NewApp(s)
	cfg, err := provider.EmulatorConfig(provider.DefaultEmulatorBase)
	if err != nil {
		t.Fatal(err)
	}
	app.Config = cfg
	app.Gateway = provider.New(cfg, provider.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(&metrics.Collector{App: app})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("healthy database: %v", err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"xaalis_provider_route_up", "xaalis_webhook_pending_deliveries", "xaalis_jobs_lag_seconds",
		"xaalis_idempotency_replays_total", "xaalis_webhook_deliveries_total"} {
		if !names[n] {
			t.Errorf("no %s on a fresh database", n)
		}
	}
	if names["xaalis_ledger_check_problems"] {
		t.Error("xaalis_ledger_check_problems before any check")
	}

	s.Close()
	mfs, err = reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "xaalis_payments_total") {
		t.Fatalf("closed database: %v", err)
	}
	found := false
	for _, mf := range mfs {
		found = found || mf.GetName() == "xaalis_provider_route_up"
	}
	if !found {
		t.Error("the process's series are lost with the database")
	}
}

// TestStoreCounters: the store's series follow its commits: commands run
// one after another commit one by one, each with its statements.
func TestStoreCounters(t *testing.T) {
	ctx := context.Background()
	s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(&metrics.Store{Stats: s})
	gather := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			out[mf.GetName()] = mf.GetMetric()[0].GetCounter().GetValue()
		}
		return out
	}
	before := gather()
	if _, _, err := xaalis.NewApp(s).CreateMerchant(ctx, xaalis.MerchantCreate{Name: "Counted", Country: "SN",
		SettlementCurrency: xaalis.XOF, Status: xaalis.MerchantActive, KYC: xaalis.KYCApproved}); err != nil {
		t.Fatal(err)
	}
	after := gather()
	commits := after["xaalis_store_commits_total"] - before["xaalis_store_commits_total"]
	if commits < 1 {
		t.Errorf("commits: +%v, want at least +1", commits)
	}
	if d := after["xaalis_store_commands_total"] - before["xaalis_store_commands_total"]; d != commits {
		t.Errorf("commands: +%v, want +%v (one a commit, run one after another)", d, commits)
	}
	if d := after["xaalis_store_statements_total"] - before["xaalis_store_statements_total"]; d < 2 {
		t.Errorf("statements: +%v, want at least the merchant's and its keys' inserts", d)
	}
}

// TestRouteUpSimulators: with no live route configured (the default
// serve), xaalis_provider_route_up still reports each enabled provider,
// through its test-mode simulator, as up; a live-only installation has no
// simulators to report.
func TestRouteUpSimulators(t *testing.T) {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	app := xaalis.NewApp(s)
	cfg, err := xaalis.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	app.Config = cfg
	app.Gateway = provider.New(cfg, provider.Options{})
	routes := func() map[string]float64 {
		t.Helper()
		reg := prometheus.NewRegistry()
		reg.MustRegister(&metrics.Collector{App: app})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]float64{}
		for _, mf := range mfs {
			if mf.GetName() != "xaalis_provider_route_up" {
				continue
			}
			for _, m := range mf.GetMetric() {
				var pr, rt string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "provider":
						pr = l.GetValue()
					case "route":
						rt = l.GetValue()
					}
				}
				out[pr+"/"+rt] = m.GetGauge().GetValue()
			}
		}
		return out
	}
	got := routes()
	for _, p := range []string{"channel_a", "channel_b", "channel_c"} {
		if got[p+"/simulator"] != 1 {
			t.Errorf("%s/simulator: %v (all: %v)", p, got[p+"/simulator"], got)
		}
	}
	if len(got) != 3 {
		t.Errorf("route_up series %v, want the three simulators", got)
	}
	app.LiveOnly = true
	if got := routes(); len(got) != 0 {
		t.Errorf("live-only: %v, want none", got)
	}
}
