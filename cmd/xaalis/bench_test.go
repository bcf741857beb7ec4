package main

// Tests of `xaalis bench`: short runs complete, measure something and
// leave a consistent ledger; targets off loopback are refused. They check
// that the tool works, never how fast anything is.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/xaalis/xaalis/internal/bench"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
)

// benchRun runs `xaalis bench --json` with args and decodes its report.
func benchRun(t *testing.T, args ...string) *bench.Report {
	t.Helper()
	return benchRunEnv(t, noEnv, args...)
}

// benchRunEnv is benchRun with the environment getenv gives.
func benchRunEnv(t *testing.T, getenv func(string) string, args ...string) *bench.Report {
	t.Helper()
	out, errOut, err := cli(t, getenv, append([]string{"bench", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("xaalis bench %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errOut)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("bench output is not a JSON report: %v\n%s", err, out)
	}
	return &rep
}

func wantMeasured(t *testing.T, r *bench.Result) {
	t.Helper()
	if r.Requests <= 0 || r.OK <= 0 || r.Throughput <= 0 {
		t.Errorf("%s: requests %d, ok %d, throughput %.1f: want all > 0", r.Scenario, r.Requests, r.OK, r.Throughput)
	}
	if l := r.Latency; l.P50 <= 0 || l.P90 < l.P50 || l.P99 < l.P90 || l.P999 < l.P99 || l.Max < l.P999 {
		t.Errorf("%s: latency percentiles %+v: want 0 < p50 ≤ p90 ≤ p99 ≤ p99.9 ≤ max", r.Scenario, l)
	}
	if r.OK != r.Requests {
		t.Errorf("%s: %d of %d requests failed: %v", r.Scenario, r.Requests-r.OK, r.Requests, r.Errors)
	}
	// The process's CPU a request, from its CPU over the measured phase.
	if want := r.CPUProcess * r.Seconds * 1e6 / float64(r.OK); r.CPUProcess > 0 && (r.CPUPerOK <= 0 || math.Abs(r.CPUPerOK-want) > 1e-6*want) {
		t.Errorf("%s: %.1f µs of CPU a request, want %.1f (%.2f cores for %.2f s, %d ok)", r.Scenario, r.CPUPerOK, want,
			r.CPUProcess, r.Seconds, r.OK)
	}
}

// The runtime samples an allocation every 512 KiB by default: a short run
// under the race detector, beside the package's other tests, allocated
// too little for the payment handler to be sure to show in
// TestBenchShortRun's profile (25 samples and none there, once in CI). This
// test binary samples every 16 KiB; xaalis bench keeps the default.
func init() { runtime.MemProfileRate = 16 << 10 }

// wantAllocProfile: --memprofile wrote a profile of what the handlers
// allocated during r's measured phase, and r's notes name it.
func wantAllocProfile(t *testing.T, r *bench.Result, path string) {
	t.Helper()
	if r == nil || !slices.Contains(r.Notes, "allocation profile of the measured phase: "+path) {
		t.Fatalf("create-payment's notes do not name the allocation profile: %+v", r)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("--memprofile wrote no profile: %v", err)
	}
	for _, s := range p.Sample {
		for _, l := range s.Location {
			for _, ln := range l.Line {
				if strings.Contains(ln.Function.Name, "handlePaymentCreate") {
					return
				}
			}
		}
	}
	t.Fatalf("the allocation profile (%d samples) has no allocation under the payment handler", len(p.Sample))
}

// wantTrace: --trace wrote a runtime execution trace of r's measured
// phase, in which the payment handler's goroutines appear, and r's notes
// name it.
func wantTrace(t *testing.T, r *bench.Result, path string) {
	t.Helper()
	if r == nil || !slices.Contains(r.Notes, "execution trace of the measured phase: "+path) {
		t.Fatalf("create-payment's notes do not name the execution trace: %+v", r)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The header of the runtime's trace format ("go 1.26 trace"), then
	// stacks whose functions are named in the trace's strings.
	if !bytes.HasPrefix(b, []byte("go 1.")) || !bytes.Contains(b[:32], []byte(" trace")) {
		t.Fatalf("--trace wrote %d bytes that are no execution trace: %q", len(b), b[:min(len(b), 32)])
	}
	if !bytes.Contains(b, []byte("handlePaymentCreate")) {
		t.Fatalf("the execution trace (%d bytes) has no stack in the payment handler", len(b))
	}
}

// TestBenchTrace is not parallel: a trace records the whole process and
// slows every test beside it, and TestBenchShortRun's allocation profile
// needs its run's allocations (under the race detector, with a trace
// running beside it, it sampled none in the payment handler).
func TestBenchTrace(t *testing.T) {
	dir := t.TempDir()
	traceFile := filepath.Join(dir, "trace.out")
	rep := benchRun(t, "--scenario", "create-payment", "--database-url", "sqlite://"+filepath.Join(dir, "bench.db"),
		"--floors=false", "--target-check=false", "--duration", "300ms", "--warmup", "0s", "--concurrency", "4",
		"--trace", traceFile)
	wantTrace(t, rep.Find(bench.CreatePayment), traceFile)
}

// TestBenchProfileFails: a trace that cannot be written fails the run,
// even with a CPU profile that started before it and stopped cleanly. Not
// parallel: the CPU profile is the process's.
func TestBenchProfileFails(t *testing.T) {
	dir := t.TempDir()
	_, errOut, err := cli(t, noEnv, "bench", "--json", "--scenario", "create-payment", "--database-url", "sqlite://"+filepath.Join(dir, "bench.db"),
		"--floors=false", "--target-check=false", "--duration", "200ms", "--warmup", "0s", "--concurrency", "2",
		"--cpuprofile", filepath.Join(dir, "cpu.pprof"), "--trace", filepath.Join(dir, "missing", "trace.out"))
	if err == nil || !strings.Contains(err.Error()+errOut, "trace.out") {
		t.Fatalf("xaalis bench with a trace in a missing directory: err %v, stderr:\n%s", err, errOut)
	}
}

// TestBenchGOMAXPROCS is not parallel: GOMAXPROCS is the process's, and
// the parallel tests' runs would set it too.
func TestBenchGOMAXPROCS(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	short := []string{"--scenario", "status", "--floors=false", "--duration", "200ms", "--warmup", "0s",
		"--concurrency", "2", "--seed", "5"}
	for _, tc := range []struct {
		name   string
		getenv func(string) string
		args   []string
		want   int
	}{
		{"default: twice the runtime's", noEnv, nil, 2 * base},
		{"--gomaxprocs", noEnv, []string{"--gomaxprocs", "3"}, 3},
		{"GOMAXPROCS set: kept", envOf("GOMAXPROCS", "1"), nil, base},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := benchRunEnv(t, tc.getenv, append(append(short, tc.args...), "--database-url", "sqlite://"+filepath.Join(t.TempDir(), "b.db"))...)
			if rep.Machine.GOMAXPROCS != tc.want {
				t.Errorf("GOMAXPROCS during the run %d, want %d", rep.Machine.GOMAXPROCS, tc.want)
			}
			if got := runtime.GOMAXPROCS(0); got != base {
				t.Errorf("GOMAXPROCS after the run %d, want it restored to %d", got, base)
			}
		})
	}
}

// TestBenchTargetAPIKey: against a running server with one merchant's
// key, the open loop after the closed one creates payments of its own.
// Both phases once sent the same Idempotency-Keys, and the open loop was
// answered with the closed loop's payments: replays measured as creations.
func TestBenchTargetAPIKey(t *testing.T) {
	t.Parallel()
	s := serve(t, noEnv, serveArgs("sqlite://"+filepath.Join(t.TempDir(), "x.db"), "--rate-limit", "100000",
		"--rate-burst", "100000", "--idempotency-quota", "0")...)
	sk, _ := s.demoKeys(t)
	rep := benchRun(t, "--target", s.api, "--api-key", sk, "--scenario", "create-payment",
		"--duration", "300ms", "--warmup", "0s", "--concurrency", "2")
	closed, open := rep.Find(bench.CreatePayment), rep.Find(bench.OpenName(bench.CreatePayment))
	if closed == nil || open == nil || closed.OK == 0 || open.OK == 0 {
		t.Fatalf("want both loops measured: %+v", rep.Results)
	}
	r := s.do(t, "GET", "/v1/payments?per_page=1", sk, "").want(t, http.StatusOK, "")
	var page struct {
		Pagination struct {
			Total int64 `json:"total"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	// A request cut at the end of a phase may still have created its
	// payment.
	if n := page.Pagination.Total; n < closed.OK+open.OK || n > closed.Requests+open.Requests {
		t.Errorf("%d payments on the server, want %d to %d (closed loop %d of %d ok, open loop %d of %d)", n,
			closed.OK+open.OK, closed.Requests+open.Requests, closed.OK, closed.Requests, open.OK, open.Requests)
	}
}

func TestBenchShortRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, memprofile := "sqlite://"+filepath.Join(dir, "bench.db"), filepath.Join(dir, "allocs.pprof")
	rep := benchRun(t, "--scenario", "create-payment,status,list,payout", "--database-url", db,
		"--duration", "500ms", "--warmup", "100ms", "--concurrency", "4", "--seed", "40", "--memprofile", memprofile)
	wantAllocProfile(t, rep.Find(bench.CreatePayment), memprofile)

	if rep.Backend != "sqlite" || rep.DB.Settings["synchronous"] != "1 (NORMAL, the WAL fdatasynced before every answer)" {
		t.Errorf("backend %q, settings %v: want sqlite with its writer's synchronous NORMAL and the syncer", rep.Backend, rep.DB.Settings)
	}
	// The disk's and the CPUs' floors are measured again at the end.
	want := []string{bench.FloorFsync, bench.FloorFsyncBusy, bench.FloorTx, bench.FloorHTTP, bench.FloorDB, bench.CreatePayment,
		bench.OpenName(bench.CreatePayment), bench.Status, bench.List, bench.Payout,
		bench.AgainName(bench.FloorFsync), bench.AgainName(bench.FloorHTTP)}
	again := map[string]string{bench.AgainName(bench.FloorFsync): bench.FloorFsync, bench.AgainName(bench.FloorHTTP): bench.FloorHTTP}
	for _, label := range want {
		r := rep.Find(label)
		if r == nil {
			t.Fatalf("no result for %s in %+v", label, rep.Results)
		}
		wantMeasured(t, r)
		name := label
		if f, ok := again[label]; ok {
			name = f
		}
		if bench.IsPhysicalFloor(name) && r.Concurrency != 1 {
			t.Errorf("%s: concurrency %d, want one operation at a time", label, r.Concurrency)
		}
		if !bench.IsFloor(name) && (r.RatioFsync == nil || *r.RatioFsync <= 0 || r.RatioTx == nil || *r.RatioTx <= 0 ||
			r.RatioHTTP == nil || *r.RatioHTTP <= 0 || r.RatioDB == nil || *r.RatioDB <= 0) {
			t.Errorf("%s: ratios to the floors missing: %v %v %v %v", label, r.RatioFsync, r.RatioTx, r.RatioHTTP, r.RatioDB)
		}
	}
	if len(rep.Results) != len(want) {
		t.Errorf("%d results, want %d", len(rep.Results), len(want))
	}
	for i, r := range rep.Results {
		if r.Scenario != want[i] {
			t.Errorf("result %d is %s, want %s", i, r.Scenario, want[i])
		}
	}
	for _, f := range []string{bench.FloorFsync, bench.FloorHTTP} {
		again := rep.Find(bench.AgainName(f))
		if again == nil || len(again.Errors) != 0 || again.OK == 0 || again.Extra["since the first measure"] != rep.Drift(f) || rep.Drift(f) == "" {
			t.Errorf("%s measured again: %+v, want no error and its drift %q", f, again, rep.Drift(f))
		}
	}
	// The open-loop run is offered 0.7 × create-payment's saturation.
	if cp, open := rep.Find(bench.CreatePayment), rep.Find(bench.OpenName(bench.CreatePayment)); open.Rate < 0.69*cp.Throughput || open.Rate > 0.71*cp.Throughput {
		t.Errorf("open loop offered %.0f req/s, want 0.7 × %.0f", open.Rate, cp.Throughput)
	}
	aims := map[string]bool{}
	for _, c := range rep.Checks {
		if c.Got == "" {
			t.Errorf("aim %q without a measure", c.Aim)
		}
		if c.Aim == "create-payment ≥ 1.0 × floor-fsync" && !strings.Contains(c.Got, "at the end of the run") {
			t.Errorf("aim %q: %q does not give the floor measured again", c.Aim, c.Got)
		}
		if c.Aim == "create-payment ≥ 1.0 × floor-fsync" && !strings.Contains(c.Got, "(floor-fsync-busy)") {
			t.Errorf("aim %q: %q does not give the floor with the CPUs busy", c.Aim, c.Got)
		}
		aims[c.Aim] = c.Met
	}
	for _, aim := range []string{"create-payment ≥ 1.0 × floor-fsync", "create-payment ≥ 3000 ok/s",
		"create-payment p99 ≤ 25 ms open loop at 0.7 × its saturation", "payout ≥ 0.8 × create-payment"} {
		if _, ok := aims[aim]; !ok {
			t.Errorf("aim %q not judged: %+v", aim, rep.Checks)
		}
	}
	if met, ok := aims["the ledger check finds 0 problems after the run"]; !ok || !met {
		t.Errorf("ledger aim: %v %v", ok, met)
	}
	if !rep.Ledger.Ran || rep.Ledger.Problems != 0 {
		t.Errorf("ledger check %+v: want run, 0 problems", rep.Ledger)
	}
}

// TestBenchBig: --big seeds payments in bulk for a merchant of its own
// (sqlite.Store and postgres.Store are BulkSeeders), then measures
// create-payment, status and list on them; the ledger stays consistent.
func TestBenchBig(t *testing.T) {
	t.Parallel()
	dbs := map[string][]string{"SQLite": {"--database-url", "sqlite://" + filepath.Join(t.TempDir(), "bench.db")}}
	if os.Getenv(pgtest.EnvURL) != "" {
		dbs["PostgreSQL"] = []string{"--database-url", os.Getenv(pgtest.EnvURL), "--fresh-schema"}
	}
	for name, db := range dbs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rep := benchRun(t, append(db, "--scenario", "status", "--floors=false", "--duration", "300ms", "--warmup", "0s",
				"--concurrency", "4", "--seed", "20", "--big", "300", "--big-duration", "1s")...)
			for _, s := range []string{bench.CreatePayment, bench.Status, bench.OpenName(bench.BigName(bench.Status, 300)),
				bench.List, bench.OpenName(bench.BigName(bench.List, 300))} {
				if !strings.Contains(s, "[") {
					s = bench.BigName(s, 300)
				}
				r := rep.Find(s)
				if r == nil {
					t.Fatalf("no result for %s in %+v", s, rep.Results)
				}
				wantMeasured(t, r)
			}
			if !rep.Ledger.Ran || rep.Ledger.Problems != 0 {
				t.Errorf("ledger check %+v: want run, 0 problems", rep.Ledger)
			}
		})
	}
}

// TestBenchWebhookDrain is not parallel: the in-process dispatcher runs on
// a shortened webhook.Schedule for its duration.
func TestBenchWebhookDrain(t *testing.T) {
	rep := benchRun(t, "--scenario", "webhook-drain", "--floors=false", "--duration", "500ms", "--warmup", "0s",
		"--drain-rate", "40", "--dispatch-interval", "100ms", "--drain-timeout", "30s")
	r := rep.Find(bench.WebhookDrain)
	if r == nil {
		t.Fatalf("no webhook-drain result: %+v", rep.Results)
	}
	if r.OK <= 0 || r.Latency.P50 <= 0 || r.LatencyOf == "" {
		t.Errorf("webhook-drain: ok %d, lag %+v (%q): want events produced and a lag", r.OK, r.Latency, r.LatencyOf)
	}
	if n, _ := r.Extra["events_acknowledged"].(float64); n <= 0 {
		t.Errorf("no event acknowledged: %v", r.Extra)
	}
	if n, _ := r.Extra["bad_signatures"].(float64); n != 0 {
		t.Errorf("%v deliveries failed signature verification", n)
	}
	if !rep.Ledger.Ran || rep.Ledger.Problems != 0 {
		t.Errorf("ledger check %+v: want run, 0 problems", rep.Ledger)
	}
}

// TestBenchServerProcess: --server-process runs xaalis serve (here the
// test binary standing in for it) on the bench's database and drives it;
// the statements, commits and CPU come from the server's /metrics, the
// payments are in the database, and the server stops with the run. Not
// parallel: the child needs this process's environment to be xaalis.
func TestBenchServerProcess(t *testing.T) {
	t.Setenv("XAALIS_TEST_BINARY_IS_XAALIS", "1")
	dir := t.TempDir()
	dbs := map[string][]string{"SQLite": {"--database-url", "sqlite://" + filepath.Join(dir, "bench.db")}}
	if os.Getenv(pgtest.EnvURL) != "" {
		dbs["PostgreSQL"] = []string{"--database-url", os.Getenv(pgtest.EnvURL), "--fresh-schema"}
	}
	for name, db := range dbs {
		t.Run(name, func(t *testing.T) {
			args := append(db, "--server-process", "--scenario", "create-payment", "--floors=false",
				"--target-check=false", "--duration", "500ms", "--warmup", "0s", "--concurrency", "2")
			profiles := filepath.Join(t.TempDir(), "server")
			if name == "SQLite" {
				// The profiles are the server's, fetched from its admin
				// listener (serve --pprof).
				args = append(args, "--cpuprofile", profiles+".cpu", "--memprofile", profiles+".mem", "--trace", profiles+".trace")
			}
			rep := benchRun(t, args...)
			r := rep.Find(bench.CreatePayment)
			if r == nil {
				t.Fatalf("no create-payment result: %+v", rep.Results)
			}
			wantMeasured(t, r)
			// The bench's own process sends no statement for a payment:
			// these are the server's.
			if r.StatementsPerOK < 5 || r.CommandsPerCommit < 1 {
				t.Errorf("%.1f statements a payment, %.1f commands a commit: want the server's counts", r.StatementsPerOK, r.CommandsPerCommit)
			}
			if r.CPUServer <= 0 || r.CPUProcess <= r.CPUServer {
				t.Errorf("CPU: both processes %.2f cores, the server's %.2f: want the server's within both", r.CPUProcess, r.CPUServer)
			}
			if r.GC != nil || r.Sched != nil {
				t.Errorf("the generator's garbage collector and scheduler reported as the server's: %+v %+v", r.GC, r.Sched)
			}
			if !strings.Contains(rep.Command, "--server-process") {
				t.Errorf("command %q does not say the server ran apart", rep.Command)
			}
			if !rep.Ledger.Ran || rep.Ledger.Problems != 0 {
				t.Errorf("ledger check %+v: want run, 0 problems", rep.Ledger)
			}
			if name == "SQLite" {
				wantServerProfiles(t, profiles)
			}
		})
	}
	// The bench's merchants are encrypted under the operator's key file
	// (here the test binary's XAALIS_SECRET_KEY_FILE), which serve opens
	// the database with: not under a key of the run's own, gone with it.
	store, err := openStore(withKeySetup(context.Background(), keySetup{file: testKeyFile()}), "sqlite://"+filepath.Join(dir, "bench.db"))
	if err != nil {
		t.Fatalf("open the database as serve would after the run: %v", err)
	}
	store.Close()
	// Without XAALIS_SECRET_KEY_FILE, the data directory's key file:
	// secret.key beside the SQLite database, made by the run.
	other := filepath.Join(dir, "data", "bench.db")
	benchRunEnv(t, envOf("XAALIS_SECRET_KEY_FILE", ""), "--database-url", "sqlite://"+other, "--server-process",
		"--scenario", "create-payment", "--floors=false", "--target-check=false", "--duration", "200ms", "--warmup", "0s", "--concurrency", "2")
	if store, err = openStore(context.Background(), "sqlite://"+other); err != nil {
		t.Fatalf("open the database as serve would after a run without XAALIS_SECRET_KEY_FILE: %v", err)
	}
	store.Close()
	if _, err := os.Stat(filepath.Join(dir, "data", "secret.key")); err != nil {
		t.Errorf("the data directory's key file: %v", err)
	}
	// The server stopped with the run, its instance row gone with it, and
	// its payments are in the database.
	sq, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "bench.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	var instances, payments int
	if err := sq.QueryRow(`SELECT (SELECT count(*) FROM server_instances), (SELECT count(*) FROM transactions WHERE type = 'payment')`).Scan(&instances, &payments); err != nil {
		t.Fatal(err)
	}
	if instances != 0 || payments == 0 {
		t.Errorf("after the run: %d instances recorded (want 0: the server stopped), %d payments (want some)", instances, payments)
	}
}

// wantServerProfiles checks the profiles of a run with --server-process:
// the server's, since only the server answers HTTP and runs its store's
// writer.
func wantServerProfiles(t *testing.T, base string) {
	t.Helper()
	served := func(p *profile.Profile) bool {
		for _, s := range p.Sample {
			for _, loc := range s.Location {
				for _, l := range loc.Line {
					if l.Function != nil && strings.HasSuffix(l.Function.Name, "internal/http.(*Server).ServeHTTP") {
						return true
					}
				}
			}
		}
		return false
	}
	// The allocations' records are published at each garbage collection,
	// and a short run may have none: the CPU profile tells whose it is.
	for _, f := range []struct {
		ext, sampleType string
		served          bool
	}{{".cpu", "cpu", true}, {".mem", "alloc_space", false}} {
		b, err := os.ReadFile(base + f.ext)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.ParseData(b)
		if err != nil {
			t.Fatalf("%s: %v", f.ext, err)
		}
		types := ""
		for _, st := range p.SampleType {
			types += st.Type + " "
		}
		if !strings.Contains(types, f.sampleType) || f.served && !served(p) {
			t.Errorf("%s profile: sample types %q, ServeHTTP in it %v: want %s and the server's requests", f.ext, types, served(p), f.sampleType)
		}
	}
	if b, err := os.ReadFile(base + ".trace"); err != nil || !bytes.HasPrefix(b, []byte("go 1.")) {
		t.Errorf("trace: %d bytes, %v: want a Go execution trace", len(b), err)
	}
}

// TestBenchServerProcessFails: a server that cannot start fails the run
// with the end of its own log, which says why.
func TestBenchServerProcessFails(t *testing.T) {
	t.Setenv("XAALIS_TEST_BINARY_IS_XAALIS", "1")
	_, _, err := cli(t, noEnv, "bench", "--server-process", "--database-url", "mysql://127.0.0.1/x",
		"--scenario", "create-payment", "--floors=false", "--duration", "100ms")
	if err == nil || !strings.Contains(err.Error(), "exited before it listened") || !strings.Contains(err.Error(), `database URL "mysql://127.0.0.1/x"`) {
		t.Errorf("error %v: want the server's exit and its log's reason", err)
	}
}

func TestBenchRefusesNonLoopbackTarget(t *testing.T) {
	t.Parallel()
	for _, target := range []string{
		"http://10.0.0.1:8080", "http://192.168.1.10", "https://example.com", "http://[::ffff:10.0.0.1]:80",
		"http://0.0.0.0:8080", "http://127.0.0.1.example.com", "ftp://127.0.0.1", "127.0.0.1:8080",
	} {
		out, _, err := cli(t, noEnv, "bench", "--target", target, "--api-key", "sk_test_x", "--duration", "100ms")
		wantErr(t, true, out, err)
		if err != nil && !strings.Contains(err.Error(), "target") {
			t.Errorf("--target %s: error %q does not name the target", target, err)
		}
	}
}

func TestBenchUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--scenario", "nope"},
		{"--concurrency", "0"},
		{"--duration", "0s"},
		{"--target", "http://127.0.0.1:1"}, // neither --database-url nor --api-key
		{"--fresh-schema"},                 // not postgres
		{"--json", "--markdown"},
		{"--limits", "maybe"},
		{"--big", "-1"},
		{"--big", "20000000"},
		{"--server-process", "--target", "http://127.0.0.1:1", "--api-key", "sk_test_x"},
		{"--server-process", "--dispatch-interval", "100ms"},
		{"--server-process", "--gomaxprocs", "3"},
	} {
		out, _, err := cli(t, noEnv, append([]string{"bench"}, args...)...)
		wantErr(t, true, out, err)
	}
}

// TestBenchWAL: on PostgreSQL each scenario counts the WAL written per
// successful request (the cluster's insert position, read before and
// after): a payment's rows are kilobytes of it, a replay writes none of
// its own. SQLite reports none.
func TestBenchWAL(t *testing.T) {
	if os.Getenv(pgtest.EnvURL) == "" {
		t.Skip(pgtest.EnvURL + " is not set; skipping PostgreSQL tests")
	}
	rep := benchRun(t, "--database-url", os.Getenv(pgtest.EnvURL), "--fresh-schema", "--scenario", "create-payment,replay",
		"--floors=false", "--target-check=false", "--duration", "500ms", "--warmup", "0s", "--concurrency", "4")
	pay, replay := rep.Find(bench.CreatePayment), rep.Find(bench.Replay)
	if pay == nil || replay == nil {
		t.Fatalf("results: %+v", rep.Results)
	}
	if pay.WALBytesPerOK < 2000 {
		t.Errorf("create-payment: %.0f bytes of WAL a payment, want the kilobytes of its rows", pay.WALBytesPerOK)
	}
	if replay.WALBytesPerOK >= pay.WALBytesPerOK/4 {
		t.Errorf("replay: %.0f bytes of WAL a request against a payment's %.0f: want far less", replay.WALBytesPerOK, pay.WALBytesPerOK)
	}
	lite := benchRun(t, "--scenario", "create-payment", "--floors=false", "--target-check=false", "--duration", "200ms",
		"--warmup", "0s", "--concurrency", "2")
	if r := lite.Find(bench.CreatePayment); r == nil || r.WALBytesPerOK != 0 {
		t.Errorf("SQLite: %+v, want no WAL figure", r)
	}
}
