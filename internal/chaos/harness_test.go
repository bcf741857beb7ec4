package chaos_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the verifier reads the SQLite file

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
)

// bin is the xaalis binary the suite builds once.
var bin string

func TestMain(m *testing.M) {
	if os.Getenv("XAALIS_CHAOS") != "1" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "xaalis-chaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "xaalis")
	build := exec.Command("go", "build", "-o", bin, "github.com/xaalis/xaalis/cmd/xaalis")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: go build:", err)
		os.Exit(1)
	}
	// One key file for every process of the suite: the servers of a
	// PostgreSQL test share one database, and no key file is written
	// into the source tree (./xaalis-data, the PostgreSQL default).
	if os.Getenv("XAALIS_SECRET_KEY_FILE") == "" {
		os.Setenv("XAALIS_SECRET_KEY_FILE", filepath.Join(dir, "secret.key"))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// needChaos skips a test outside the chaos step.
func needChaos(t *testing.T) {
	t.Helper()
	if bin == "" {
		t.Skip("the chaos suite runs with XAALIS_CHAOS=1 (a step of .ci/run)")
	}
}

// backend is a database the suite runs a server on.
type backend struct {
	name string
	url  string
	// path is the SQLite file; "" for PostgreSQL.
	path string
}

func sqliteBackend(t *testing.T, dir string) backend {
	if dir == "" {
		dir = t.TempDir()
	}
	p := filepath.Join(dir, "xaalis.db")
	return backend{name: "SQLite", url: "sqlite://" + p, path: p}
}

func postgresBackend(t *testing.T) backend {
	if os.Getenv(pgtest.EnvURL) == "" {
		t.Fatalf("%s is not set: the chaos suite needs PostgreSQL", pgtest.EnvURL)
	}
	return backend{name: "PostgreSQL", url: pgtest.URL(t)}
}

// cli runs a command of the binary and returns its stdout.
func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("xaalis %s: %w\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

type merchant struct {
	ID   string `json:"merchant_id"`
	Keys struct {
		SecretTest string `json:"secret_test"`
		SecretLive string `json:"secret_live"`
	} `json:"keys"`
}

// newMerchant creates an active merchant whose KYC is approved (live mode).
func newMerchant(t *testing.T, db, name string) merchant {
	t.Helper()
	out, err := cli(t, "merchant", "create", "--database-url", db, "--name", name, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var m merchant
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("merchant create: %v: %s", err, out)
	}
	if _, err := cli(t, "merchant", "update", m.ID, "--database-url", db, "--kyc", "approved"); err != nil {
		t.Fatal(err)
	}
	return m
}

// emulator is the provider emulator, in the test's process: it outlives
// every server the test kills.
type emulator struct {
	*provider.Emulator
	url        string
	configPath string
}

// newEmulator starts the emulator and writes the configuration that points
// live mode at it, with routeTimeout for every route and reconciliation
// after reconcile seconds.
func newEmulator(t *testing.T, routeTimeout time.Duration, reconcile int) *emulator {
	t.Helper()
	emu := provider.NewEmulator(provider.EmulatorOptions{})
	srv := httptest.NewServer(emu)
	t.Cleanup(func() { srv.Close(); emu.Close() })
	raw, err := provider.EmulatorConfigJSON(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range doc["providers"].(map[string]any) {
		for _, r := range p.(map[string]any)["routes"].([]any) {
			r.(map[string]any)["timeout_ms"] = routeTimeout.Milliseconds()
		}
	}
	doc["reconcile_after_seconds"] = reconcile
	raw, _ = json.MarshalIndent(doc, "", "  ")
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return &emulator{Emulator: emu, url: srv.URL, configPath: path}
}

// server is one `xaalis serve` subprocess, restartable on the same
// addresses.
type server struct {
	t     *testing.T
	name  string
	args  []string
	addr  string
	api   string
	cmd   *exec.Cmd
	out   *testutil.SyncBuffer // stdout and stderr of every run
	done  chan struct{}
	runs  int
	alive atomic.Bool
}

var listeningLine = regexp.MustCompile(`Xaalis API listening on http://(\S+) `)

// newServer prepares a server on db; start runs it.
func newServer(t *testing.T, name, db string, emu *emulator, extra ...string) *server {
	addr := testutil.FreeAddr(t)
	s := &server{t: t, name: name, addr: addr, api: "http://" + addr, out: &testutil.SyncBuffer{}}
	s.args = append([]string{"serve", "--database-url", db, "--addr", addr, "--admin-addr", testutil.FreeAddr(t),
		"--public-url", s.api, "--heartbeat", "500ms", "--jobs-interval", "1s", "--rate-limit", "100000", "--rate-burst", "100000",
		"--idempotency-quota", "0", "--insecure-webhooks", "--webhook-retry-scale", "0.001", "--log-level", "warn"}, extra...)
	if emu != nil {
		s.args = append(s.args, "--config", emu.configPath)
	}
	t.Cleanup(func() {
		if s.alive.Load() {
			s.stop()
		}
		if t.Failed() {
			out := s.out.String()
			if len(out) > 6000 {
				out = "…" + out[len(out)-6000:]
			}
			t.Logf("%s output (end):\n%s", s.name, out)
		}
	})
	return s
}

// start runs the server and waits until it listens.
func (s *server) start() {
	s.t.Helper()
	s.runs++
	cmd := exec.Command(bin, s.args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = io.MultiWriter(pw, s.out), s.out
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	listening := make(chan struct{})
	go func() {
		buf := &bytes.Buffer{}
		tmp := make([]byte, 4096)
		once := false
		for {
			n, err := pr.Read(tmp)
			buf.Write(tmp[:n])
			if !once && listeningLine.Match(buf.Bytes()) {
				once = true
				close(listening)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		pw.Close()
		s.alive.Store(false)
		close(s.done)
	}()
	select {
	case <-listening:
		s.alive.Store(true)
	case <-s.done:
		s.t.Fatalf("%s exited before listening:\n%s", s.name, s.out.String())
	case <-time.After(30 * time.Second):
		s.t.Fatalf("%s did not listen in 30 s:\n%s", s.name, s.out.String())
	}
}

// kill sends SIGKILL: no shutdown runs, requests in flight are cut.
func (s *server) kill() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// stop sends SIGTERM and waits for the graceful shutdown.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(40 * time.Second):
		s.t.Errorf("%s did not stop 40 s after SIGTERM", s.name)
		s.kill()
	}
}

// client sends API requests; it never retries by itself.
var client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// answer is one HTTP answer, or the error of a request that got none.
type answer struct {
	status int
	body   []byte
	header http.Header
	err    error
}

func (a answer) code() string {
	var env struct{ Error struct{ Code string } }
	_ = json.Unmarshal(a.body, &env)
	return env.Error.Code
}

// id is data.id of a record answer.
func (a answer) id() string {
	var env struct{ Data struct{ ID string } }
	_ = json.Unmarshal(a.body, &env)
	return env.Data.ID
}

func (a answer) field(name string) string {
	var env struct{ Data map[string]any }
	_ = json.Unmarshal(a.body, &env)
	s, _ := env.Data[name].(string)
	return s
}

func send(base, method, path, key, idem, body string) answer {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if idem != "" {
		req.Header.Set("Idempotency-Key", idem)
	}
	res, err := client.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{err: err}
	}
	return answer{status: res.StatusCode, body: b, header: res.Header}
}

// request is one write of the load, kept to be retried with the same
// Idempotency-Key and body until it has an outcome.
type request struct {
	op, method, path, key, idem, body string
	// first is the answer to the first attempt; final the outcome.
	first, final answer
	cycle        int
	// inFlight: the first attempt got no answer (the server died).
	inFlight bool
	tries    int
}

// settled reports an outcome: an answer that is not a 5xx, or a provider's
// refusal (502 gateway_error: a test-mode simulator that lost its state
// in the crash refuses the payer's action on a payment it forgot).
func (r *request) settled() bool { return outcome(r.final) }

func outcome(a answer) bool {
	return a.err == nil && a.status > 0 && (a.status < 500 || (a.status == 502 && a.code() == "gateway_error"))
}

// retry sends the request again until it has an outcome (a 2xx or 4xx)
// or the deadline passes; 409 (the key still in flight), 5xx and
// connection errors are retried. It returns how many 409 it met.
func (r *request) retry(base string, deadline time.Time) (conflicts int) {
	for {
		r.tries++
		a := send(base, r.method, r.path, r.key, r.idem, r.body)
		r.final = a
		switch {
		case a.status == http.StatusConflict && a.code() == "idempotency_conflict":
			conflicts++
		case outcome(a):
			return conflicts
		}
		if time.Now().After(deadline) {
			return conflicts
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// journal keeps every request of a test.
type journal struct {
	mu   sync.Mutex
	reqs []*request
}

func (j *journal) add(r *request) {
	j.mu.Lock()
	j.reqs = append(j.reqs, r)
	j.mu.Unlock()
}

func (j *journal) all() []*request {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]*request(nil), j.reqs...)
}

// counter makes unique names.
var counter atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, counter.Add(1))
}

// phone is a Senegalese mobile number; magic "0001" settles at once in
// test mode and the emulator, "" gives an ordinary number (pending until
// the payer acts).
func phone(rng *rand.Rand, magic string) string {
	if magic == "" {
		magic = fmt.Sprint(1000 + rng.IntN(9000))
	}
	return fmt.Sprintf("+22177%03d%s", rng.IntN(1000), magic)
}

func paymentBody(ref string, amount int, prov, payer string) string {
	return fmt.Sprintf(`{"merchant_ref":"%s","amount":%d,"provider":"%s","payer":{"phone":"%s"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko","expires_in":600}`,
		ref, amount, prov, payer)
}

func payoutBody(ref string, amount int, prov, to string) string {
	return fmt.Sprintf(`{"merchant_ref":"%s","amount":%d,"currency":"XOF","provider":"%s","recipient":{"phone":"%s"}}`, ref, amount, prov, to)
}

// verifier reads the database after the servers stopped.
type verifier struct {
	t  *testing.T
	b  backend
	db *sql.DB
	pg *pgx.Conn
}

func newVerifier(t *testing.T, b backend) *verifier {
	v := &verifier{t: t, b: b}
	if b.path != "" {
		db, err := sql.Open("sqlite", "file:"+b.path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		v.db = db
		t.Cleanup(func() { db.Close() })
		return v
	}
	conn, err := pgx.Connect(context.Background(), b.url)
	if err != nil {
		t.Fatal(err)
	}
	v.pg = conn
	t.Cleanup(func() { conn.Close(context.Background()) })
	return v
}

// rows runs a query and returns every row as strings (NULL is "").
func (v *verifier) rows(q string) [][]string {
	v.t.Helper()
	var out [][]string
	if v.db != nil {
		rs, err := v.db.Query(q)
		if err != nil {
			v.t.Fatalf("%s: %v", q, err)
		}
		defer rs.Close()
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				v.t.Fatal(err)
			}
			row := make([]string, len(cols))
			for i, x := range vals {
				row[i] = x.String
			}
			out = append(out, row)
		}
		if err := rs.Err(); err != nil {
			v.t.Fatal(err)
		}
		return out
	}
	rs, err := v.pg.Query(context.Background(), q)
	if err != nil {
		v.t.Fatalf("%s: %v", q, err)
	}
	defer rs.Close()
	for rs.Next() {
		vals, err := rs.Values()
		if err != nil {
			v.t.Fatal(err)
		}
		row := make([]string, len(vals))
		for i, x := range vals {
			if x != nil {
				row[i] = fmt.Sprint(x)
			}
		}
		out = append(out, row)
	}
	if err := rs.Err(); err != nil {
		v.t.Fatal(err)
	}
	return out
}

// figures are what a test reports (docs/reliability.md).
type figures struct {
	Test, Backend      string
	Cycles             int
	Requests, Answered int
	Unanswered         int // first attempt without an answer (retried)
	Refused503         int // first attempt answered 503 (retried)
	Retried            int
	RetriedCreated     int // retried to 2xx
	RetriedRefused     int // retried to 4xx
	Conflicts409       int // in-flight answers met while retrying
	Lost, Duplicated   int
	Extra              map[string]any `json:",omitempty"`
	Seconds            float64
	started            time.Time
	t                  *testing.T
}

func newFigures(t *testing.T, test, backend string) *figures {
	return &figures{t: t, Test: test, Backend: backend, started: time.Now(), Extra: map[string]any{}}
}

// report logs the figures and appends them to $XAALIS_ARTIFACTS_DIR/chaos.jsonl.
func (f *figures) report() {
	f.Seconds = time.Since(f.started).Round(100 * time.Millisecond).Seconds()
	b, _ := json.Marshal(f)
	f.t.Logf("figures: %s", b)
	if dir := os.Getenv("XAALIS_ARTIFACTS_DIR"); dir != "" {
		if fh, err := os.OpenFile(filepath.Join(dir, "chaos.jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fh.Write(append(b, '\n'))
			fh.Close()
		}
	}
}

// tally counts the journal into the figures.
func (f *figures) tally(j *journal) {
	for _, r := range j.all() {
		f.Requests++
		switch {
		case r.inFlight:
			f.Unanswered++
		case r.first.status >= 500:
			f.Refused503++
		default:
			f.Answered++
		}
		if r.tries > 0 {
			f.Retried++
			if r.final.status >= 200 && r.final.status < 300 {
				f.RetriedCreated++
			} else if r.final.status >= 400 && r.final.status < 500 {
				f.RetriedRefused++
				codes, _ := f.Extra["retried_refused_codes"].(map[string]int)
				if codes == nil {
					codes = map[string]int{}
					f.Extra["retried_refused_codes"] = codes
				}
				codes[r.op+" "+r.final.code()]++
			}
		}
	}
}

// checkOutcomes: every request of the journal has exactly one outcome,
// never a 500.
func checkOutcomes(t *testing.T, j *journal) {
	t.Helper()
	for _, r := range j.all() {
		if !r.settled() {
			t.Errorf("%s %s (key %s) has no outcome: %d %v %s", r.method, r.path, r.idem, r.final.status, r.final.err, r.final.body)
		}
		for _, a := range []answer{r.first, r.final} {
			if a.status == 500 {
				t.Errorf("%s %s answered 500: %s", r.method, r.path, a.body)
			}
			if a.status == 503 && a.header.Get("Retry-After") == "" {
				t.Errorf("%s %s answered 503 without Retry-After: %s", r.method, r.path, a.body)
			}
		}
	}
}

// statusEvent is the event a transaction's current status must have had.
var statusEvent = map[string]map[string]string{
	"payment": {"success": "payment.success", "failed": "payment.failed", "cancelled": "payment.cancelled",
		"expired": "payment.expired", "refunded": "payment.refunded", "disputed": "dispute.opened"},
	"payout": {"success": "payout.success", "failed": "payout.failed", "cancelled": "payout.cancelled"},
	"refund": {"success": "refund.success", "failed": "refund.failed"},
}

// checkStore verifies the database against the journal: `xaalis ledger
// check` is clean; every record a 2xx answer named is there, in a status
// its answer leads to, and every status has its event; no request made two
// records (lost and duplicated go to the figures); available went below
// zero only through refunds and disputes.
func checkStore(t *testing.T, b backend, j *journal, f *figures) {
	t.Helper()
	if out, err := cli(t, "ledger", "check", "--database-url", b.url); err != nil {
		t.Errorf("xaalis ledger check: %v\n%s", err, out)
	}
	v := newVerifier(t, b)
	type txRow struct{ typ, status, ref, idem, reference string }
	txs := map[string]txRow{}
	for _, r := range v.rows(`SELECT id, type, status, COALESCE(merchant_ref, ''), COALESCE(idempotency_key, ''), reference FROM transactions`) {
		txs[r[0]] = txRow{r[1], r[2], r[3], r[4], r[5]}
	}
	events := map[string]map[string]bool{}
	for _, r := range v.rows(`SELECT object_id, type FROM events`) {
		if events[r[0]] == nil {
			events[r[0]] = map[string]bool{}
		}
		events[r[0]][r[1]] = true
	}
	prs := map[string]string{}
	for _, r := range v.rows(`SELECT id, status FROM payout_requests`) {
		prs[r[0]] = r[1]
	}
	splits := map[string]bool{}
	for _, r := range v.rows(`SELECT id FROM split_items`) {
		splits[r[0]] = true
	}
	// Every status has its event.
	for id, tx := range txs {
		if ev, ok := statusEvent[tx.typ][tx.status]; ok && !events[id][ev] && tx.status != "disputed" {
			t.Errorf("%s %s is %s without %s", tx.typ, id, tx.status, ev)
		}
	}
	for id, st := range prs {
		if !events[id]["payout_request.submitted"] || (st != "submitted" && !events[id]["payout_request."+st]) {
			t.Errorf("payout request %s (%s) lacks its events: %v", id, st, events[id])
		}
	}
	// Every answered write is there; each request made at most one record.
	made := map[string]int{}
	for _, r := range j.all() {
		a := r.final
		if a.status < 200 || a.status >= 300 {
			continue
		}
		switch r.op {
		case "split":
			var env struct{ Data []struct{ ID string } }
			_ = json.Unmarshal(a.body, &env)
			for _, it := range env.Data {
				if !splits[it.ID] {
					f.Lost++
					t.Errorf("split item %s answered but missing", it.ID)
				}
			}
		case "payout_request":
			if _, ok := prs[a.id()]; !ok {
				f.Lost++
				t.Errorf("payout request %s answered but missing", a.id())
			}
		case "simulate", "verify":
		default:
			tx, ok := txs[a.id()]
			if !ok {
				f.Lost++
				t.Errorf("%s %s answered (%s) but missing", r.op, a.id(), r.idem)
				continue
			}
			made[tx.typ]++
			if answered := a.field("status"); answered == "success" && tx.status != "success" && tx.status != "refunded" && tx.status != "disputed" {
				f.Lost++
				t.Errorf("%s %s answered success, now %s", r.op, a.id(), tx.status)
			}
		}
	}
	// Records of each kind: as many as answers named (funding included).
	kinds := map[string]int{}
	seenIdem := map[string]bool{}
	for _, tx := range txs {
		kinds[tx.typ]++
		if tx.idem != "" && tx.typ != "payment" {
			if seenIdem[tx.typ+tx.idem] {
				f.Duplicated++
				t.Errorf("two %ss made under Idempotency-Key %s", tx.typ, tx.idem)
			}
			seenIdem[tx.typ+tx.idem] = true
		}
	}
	distinct := map[string]map[string]bool{}
	for _, r := range j.all() {
		if r.final.status >= 200 && r.final.status < 300 && r.op != "split" && r.op != "payout_request" && r.op != "simulate" && r.op != "verify" {
			if tx, ok := txs[r.final.id()]; ok {
				if distinct[tx.typ] == nil {
					distinct[tx.typ] = map[string]bool{}
				}
				distinct[tx.typ][r.final.id()] = true
			}
		}
	}
	for typ, n := range kinds {
		if n != len(distinct[typ]) {
			f.Duplicated += n - len(distinct[typ])
			t.Errorf("%d %ss in the database, %d answered: a request made a record it did not answer, or two", n, typ, len(distinct[typ]))
		}
	}
	var answeredPR int
	for _, r := range j.all() {
		if r.op == "payout_request" && r.final.status == 201 {
			answeredPR++
		}
	}
	if len(prs) != answeredPR {
		f.Duplicated += len(prs) - answeredPR
		t.Errorf("%d payout requests in the database, %d answered", len(prs), answeredPR)
	}
	checkDebtOnlyFromRefunds(t, v)
}

// checkDebtOnlyFromRefunds replays every merchant's available balance in
// the order its entries were written: an entry other than a refund's or a
// dispute's may never leave it below zero, nor deeper below. (Exact on
// SQLite, whose single writer writes in commit order; on PostgreSQL every
// debit of available is written once it holds the balance's lock (a
// payout's at its commit, after its check), so the order of writing is
// the order of debits, and credits can only seem earlier than they were.)
func checkDebtOnlyFromRefunds(t *testing.T, v *verifier) {
	t.Helper()
	order := "e.rowid, p.line"
	if v.pg != nil {
		order = "e.seq, p.line"
	}
	bal := map[string]int64{}
	neg := 0
	for _, r := range v.rows(`SELECT p.account, p.amount, e.kind FROM ledger_postings p JOIN ledger_entries e ON e.id = p.entry_id
		WHERE p.account LIKE '%:merchant:%:available' ORDER BY ` + order) {
		var amt int64
		fmt.Sscan(r[1], &amt)
		before := bal[r[0]]
		bal[r[0]] += amt
		if amt < 0 && bal[r[0]] < 0 {
			neg++
			if r[2] != "refund.reserve" && r[2] != "dispute.open" {
				t.Errorf("%s went from %d to %d through %s: only refunds and disputes may", r[0], before, bal[r[0]], r[2])
			}
		}
	}
	t.Logf("available went below zero %d times, each through a refund or a dispute", neg)
}

// checkPayoutsSentOnce: the emulator received each live payout once.
func checkPayoutsSentOnce(t *testing.T, emu *emulator, f *figures) {
	t.Helper()
	n := 0
	for _, p := range emu.Payouts() {
		n++
		if p.Requests != 1 {
			f.Duplicated++
			t.Errorf("payout %s reached the provider %d times", p.Reference, p.Requests)
		}
	}
	f.Extra["emulator_payouts"] = n
}

// waitReady polls /readyz until 200.
func waitReady(t *testing.T, base string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if a := send(base, "GET", "/readyz", "", "", ""); a.status == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz not ready within %v", base, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// must fails the test unless a is want.
func must(t *testing.T, what string, a answer, want int) answer {
	t.Helper()
	if a.err != nil || a.status != want {
		t.Fatalf("%s: got %d %v %s, want %d", what, a.status, a.err, a.body, want)
	}
	return a
}
