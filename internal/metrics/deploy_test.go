package metrics_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xaalis/xaalis/internal/metrics"
)

const (
	alertsPath    = "../../deploy/prometheus/alerts.yml"
	alertTests    = "../../deploy/prometheus/alerts_test.yml"
	dashboardPath = "../../deploy/grafana/xaalis.json"
)

// named are the series the issue names: the board and the alerts must
// stay on them.
var named = []string{
	"xaalis_payments_total", "xaalis_payment_amount_xof_total", "xaalis_provider_requests_total",
	"xaalis_provider_request_duration_seconds", "xaalis_provider_route_up", "xaalis_webhook_deliveries_total",
	"xaalis_webhook_pending_deliveries", "xaalis_webhook_oldest_pending_seconds", "xaalis_jobs_lag_seconds",
	"xaalis_idempotency_replays_total", "xaalis_ledger_check_problems",
}

// exposed lists every xaalis_ series the server exposes.
func exposed(t *testing.T) []string {
	t.Helper()
	var out []string
	ch := make(chan *prometheus.Desc, 64)
	(&metrics.Collector{}).Describe(ch)
	(&metrics.Store{}).Describe(ch)
	close(ch)
	fq := regexp.MustCompile(`fqName: "([a-z_:]+)"`)
	for d := range ch {
		out = append(out, fq.FindStringSubmatch(d.String())[1])
	}
	reg := prometheus.NewRegistry()
	metrics.NewProvider(reg).ProviderRequest("channel_a", "direct", "initiate", "ok", time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		out = append(out, mf.GetName())
	}
	// The API's own series (internal/http).
	return append(out, "xaalis_http_requests_total", "xaalis_http_request_duration_seconds")
}

var seriesName = regexp.MustCompile(`\bxaalis_[a-z_]+`)

// known reports whether a name in an expression is an exposed series (or
// a histogram's _bucket, _sum or _count).
func known(all []string, name string) bool {
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if strings.HasSuffix(name, suffix) && slices.Contains(all, strings.TrimSuffix(name, suffix)) {
			return true
		}
	}
	return false
}

// TestExposedNames: the collectors expose every series the issue names.
func TestExposedNames(t *testing.T) {
	all := exposed(t)
	for _, n := range named {
		if !slices.Contains(all, n) {
			t.Errorf("%s is not exposed (exposed: %v)", n, all)
		}
	}
}

// dashboardExprs reads the board's queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if d.UID == "" || len(d.Panels) == 0 {
		t.Fatalf("%s: no uid or no panel", dashboardPath)
	}
	var out []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	return out
}

// TestDashboard: the board queries only exposed series, and every named
// series has a panel.
func TestDashboard(t *testing.T) {
	all := exposed(t)
	used := map[string]bool{}
	for _, e := range dashboardExprs(t) {
		for _, n := range seriesName.FindAllString(e, -1) {
			if !known(all, n) {
				t.Errorf("the board queries %s, which no collector exposes: %s", n, e)
			}
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				n = strings.TrimSuffix(n, s)
			}
			used[n] = true
		}
	}
	for _, n := range named {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
	b, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range seriesName.FindAllString(string(b), -1) {
		// xaalis_webhook_* in a comment names a family.
		if !strings.HasSuffix(n, "_") && !known(all, n) {
			t.Errorf("alerts.yml uses %s, which no collector exposes", n)
		}
	}
}

// promtool finds Debian's promtool (package prometheus); CI installs it
// and fails when this test skips.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not found: install Debian's prometheus package to check deploy/prometheus/alerts.yml")
	}
	return p
}

func runTool(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s:\n%s", filepath.Base(name), strings.Join(args, " "), out)
}

// TestAlertRules: promtool checks the rules and runs their unit tests (a
// route down 5 minutes, a success rate under 80% for 10 minutes, a
// delivery pending over 15 minutes, a ledger problem, a lagging job).
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	runTool(t, p, "check", "rules", alertsPath)
	runTool(t, p, "test", "rules", alertTests)
}

// TestDashboardQueries: every query of the board parses, checked by
// promtool as recording rules.
func TestDashboardQueries(t *testing.T) {
	p := promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range dashboardExprs(t) {
		e = strings.ReplaceAll(e, "$mode", "live")
		q, _ := json.Marshal(e)
		b.WriteString("      - record: xaalis:dashboard:q" + string(rune('a'+i%26)) + strings.Repeat("x", i/26) + "\n")
		b.WriteString("        expr: " + string(q) + "\n")
	}
	path := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runTool(t, p, "check", "rules", path)
}
