package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xaalis/xaalis/internal/bench"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// serverSample is what a run reads of the server it drives before and
// after a scenario: the store's counters and, for a server in a process of
// its own, that process's CPU time.
type serverSample struct {
	stats xaalis.StoreStats
	cpu   time.Duration
}

// listeningLine is serve's line naming its listeners.
var listeningLine = regexp.MustCompile(`^Xaalis API listening on (http://\S+) \(admin on (http://\S+)\)`)

// startServerProcess runs `xaalis serve` (this executable) as a child
// process over the bench's database, on 127.0.0.1 with ports of the
// system's choosing, with what startInProcess gives its server: rate
// limits and the idempotency quota out of reach, the business limits
// raised but checked (a configuration file of benchConfig's), no periodic
// ledger check, and, with short, webhook retries within a run. The bench
// then drives it over loopback as any client would: the generator and the
// server share the machine's CPUs but not one Go runtime, its scheduler
// and its garbage collector. The bench opens the database too, to make
// its merchants, seed and check the ledger, as `xaalis merchant create`
// would beside a running server.
func startServerProcess(ctx context.Context, o benchOptions, short bool, logf func(string, ...any)) (*benchTarget, error) {
	dir, err := os.MkdirTemp("", "xaalis-bench-server-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	business, err := benchConfig(o.configPath, o.limitsOff)
	if err != nil {
		cleanup()
		return nil, err
	}
	b, err := json.Marshal(business)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("bench configuration: %w", err)
	}
	configPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(configPath, b, 0o600); err != nil {
		cleanup()
		return nil, err
	}
	// The server and the bench's own store read the database's secrets
	// with the operator's key file, as serve and `xaalis merchant create`
	// beside it would (XAALIS_SECRET_KEY_FILE, or secret.key in the data
	// directory), made here on first use before two processes could both
	// make it. A key file of the run's own, deleted with it, would leave
	// the bench's merchants encrypted under a lost key, and serve, or the
	// next run, refusing the database.
	ki, err := loadKeyring(ctx, o.dbURL, nil)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("secret key file: %w", err)
	}
	keyPath := ki.keyring.Path()
	exe, err := os.Executable()
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("find this executable: %w", err)
	}
	level, _ := o.logLevel.MarshalText()
	retry := 1.0
	if short {
		retry = bench.RetryScale
	}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--database-url", o.dbURL,
		"--config", configPath, "--secret-key-file", keyPath, "--log-level", string(level),
		"--rate-limit", "1e9", "--rate-burst", strconv.Itoa(1 << 30), "--idempotency-quota", "0",
		"--ledger-check-interval", "0", "--webhook-retry-scale", strconv.FormatFloat(retry, 'g', -1, 64),
		// The drain's receivers are on loopback over http.
		"--insecure-webhooks"}
	if o.cpuprofile != "" || o.memprofile != "" || o.trace != "" {
		// The profiles asked for are the server's (fetchProfile).
		args = append(args, "--pprof")
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = serverEnv(os.Environ())
	// The server's log, a line a request, is written and read but kept
	// only for its end, as the in-process server's is formatted and
	// discarded: a file would add its writes to the disk the database's
	// fsyncs wait on.
	logs := &tail{max: 4 << 10}
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		cleanup()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cleanup()
		return nil, fmt.Errorf("start xaalis serve: %w", err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after the listening line
			}
		}
		close(lines)
	}()
	kill := func() error {
		_ = cmd.Process.Signal(os.Interrupt)
		var err error
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = errors.Join(errors.New("xaalis serve did not stop within 30 s of SIGINT: killed"), <-exited)
		}
		if err != nil {
			err = fmt.Errorf("xaalis serve: %w%s", err, logs.String())
		}
		cleanup()
		return err
	}
	var base, admin string
	deadline := time.NewTimer(2 * time.Minute) // PostgreSQL's migrations on a fresh schema
	defer deadline.Stop()
	waitLine := func() error {
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					return errors.New("xaalis serve exited before it listened")
				}
				if m := listeningLine.FindStringSubmatch(line); m != nil {
					base, admin = m[1], m[2]
					return nil
				}
			case <-deadline.C:
				return errors.New("xaalis serve did not listen within 2 minutes")
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	go func() { exited <- cmd.Wait() }()
	if err := waitLine(); err != nil {
		return nil, errors.Join(err, kill())
	}
	logf("server: xaalis serve, process %d, on %s (admin %s)", cmd.Process.Pid, base, admin)
	t, err := attachTarget(withKeyFile(ctx, keyPath), o)
	if err != nil {
		return nil, errors.Join(err, kill())
	}
	// The server checkpoints its SQLite database's WAL; a second
	// checkpointer here would copy the same frames from this process and
	// hold the server's writer in its own RESTARTs.
	if l, ok := t.store.(interface{ LeaveCheckpoints() }); ok {
		l.LeaveCheckpoints()
	}
	client := &http.Client{Timeout: 30 * time.Second}
	closeStore := t.stop
	t.base, t.apart, t.admin = base, true, admin
	t.sample = func(ctx context.Context) (serverSample, error) { return scrapeServer(ctx, client, admin+"/metrics") }
	t.stop = func() error { return errors.Join(closeStore(), kill()) }
	return t, nil
}

// serverEnv is the bench's environment for its server, without what would
// set the server's defaults behind the bench's back (XAALIS_*: a live-only
// installation, a public URL), but for the variable that lets the tests'
// binary stand in for xaalis (TestMain).
func serverEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "XAALIS_") || strings.HasPrefix(kv, "XAALIS_TEST_BINARY_IS_XAALIS=") {
			out = append(out, kv)
		}
	}
	return out
}

// tail keeps at least the last max bytes written to it: the end of a
// log, for an error.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	// Cut back to max once twice max is held: a copy every max bytes,
	// not at every line.
	if over := len(t.b) - t.max; over > t.max {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is the log's end, introduced for an error, or "".
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	if len(b) > t.max {
		b = b[len(b)-t.max:]
	}
	if len(b) == 0 {
		return ""
	}
	return "; its log ends:\n" + string(b)
}

// scrapeServer reads the store's counters and the process's CPU time off a
// server's /metrics.
func scrapeServer(ctx context.Context, client *http.Client, url string) (serverSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return serverSample{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return serverSample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return serverSample{}, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return serverSample{}, fmt.Errorf("scrape %s: %w", url, err)
	}
	value := func(name string) (float64, error) {
		mf := mfs[name]
		if mf == nil || len(mf.GetMetric()) != 1 {
			return 0, fmt.Errorf("scrape %s: no %s", url, name)
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), nil
		}
		return m.GetUntyped().GetValue(), nil
	}
	var s serverSample
	for _, f := range []struct {
		name string
		dst  *int64
	}{
		{"xaalis_store_statements_total", &s.stats.Statements},
		{"xaalis_store_commits_total", &s.stats.Transactions},
		{"xaalis_store_commands_total", &s.stats.Commands},
	} {
		v, err := value(f.name)
		if err != nil {
			return serverSample{}, err
		}
		*f.dst = int64(v)
	}
	cpu, err := value("process_cpu_seconds_total")
	if err != nil {
		return serverSample{}, err
	}
	s.cpu = time.Duration(cpu * float64(time.Second))
	return s, nil
}

// fetchProfile records the server's profile (a /debug/pprof/ name:
// profile, allocs, trace) over d from the moment start is called: start
// asks the server for it and returns at once; stop waits for the
// server's answer, written to start's writer. A profile's seconds are
// whole, so it may outlast d by up to a second.
func fetchProfile(ctx context.Context, admin, name string, d time.Duration) (start func(io.Writer) error, stop func() error) {
	secs := int64(math.Ceil(d.Seconds()))
	url := fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", admin, name, max(secs, 1))
	done := make(chan error, 1)
	start = func(w io.Writer) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		go func() {
			done <- func() error {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return fmt.Errorf("the server's %s: %w", name, err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
					return fmt.Errorf("the server's %s: GET %s: %s: %s", name, url, resp.Status, strings.TrimSpace(string(b)))
				}
				if _, err := io.Copy(w, resp.Body); err != nil {
					return fmt.Errorf("the server's %s: %w", name, err)
				}
				return nil
			}()
		}()
		return nil
	}
	stop = func() error { return <-done }
	return start, stop
}
