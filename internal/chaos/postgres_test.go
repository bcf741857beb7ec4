package chaos_test

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
)

// TestPostgresRestart takes PostgreSQL away under load, then brings it
// back, without touching xaalis: /readyz goes unready (503) and ready
// again by itself; meanwhile requests answer 503 service_unavailable with
// Retry-After, never a 500; afterwards every request retried with its key
// has exactly one outcome, nothing answered is lost and nothing is half
// written (each record with its events, the ledger clean).
//
// With XAALIS_CHAOS_PG_RESTART=1 the cluster itself is restarted
// (pg_ctlcluster, as root: .ci/run runs this alone). Otherwise the test's
// own database stops accepting connections and its backends are
// terminated for three seconds, which no one else sharing the cluster
// notices.
func TestPostgresRestart(t *testing.T) {
	needChaos(t)
	base := os.Getenv(pgtest.EnvURL)
	if base == "" {
		t.Fatalf("%s is not set: the chaos suite needs PostgreSQL", pgtest.EnvURL)
	}
	restart := os.Getenv("XAALIS_CHAOS_PG_RESTART") == "1"
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var rb [6]byte
	for i := range rb {
		rb[i] = byte(rand.IntN(256))
	}
	dbName := "xaalis_chaos_" + hex.EncodeToString(rb[:])
	if _, err := admin.Exec(ctx, `CREATE DATABASE `+dbName); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop %s: %v", dbName, err)
			return
		}
		defer c.Close(context.Background())
		_, _ = c.Exec(context.Background(), `ALTER DATABASE `+dbName+` ALLOW_CONNECTIONS true`)
		if _, err := c.Exec(context.Background(), `DROP DATABASE `+dbName+` WITH (FORCE)`); err != nil {
			t.Errorf("drop %s: %v", dbName, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + dbName
	b := backend{name: "PostgreSQL", url: u.String()}
	f := newFigures(t, "postgres_restart", b.name)
	f.Extra["mode"] = map[bool]string{true: "pg_ctlcluster restart", false: "database closed, backends terminated"}[restart]

	if _, err := cli(t, "migrate", "--database-url", b.url); err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, b.url, "Restart shop")
	ben := newMerchant(t, b.url, "Restart seller")
	debtor := newMerchant(t, b.url, "Restart debtor")
	a := newServer(t, "server", b.url, nil)
	a.start()
	j := &journal{}
	l := newLoad(t, m, ben.ID, debtor, nil, j)
	l.setBase(a.api)
	l.fund(a.api, false)
	l.life.Add(1)

	// Readiness, every 100 ms, all along.
	type probe struct {
		at     time.Time
		status int
		code   string
	}
	var (
		mu     sync.Mutex
		probes []probe
	)
	stopProbe := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-stopProbe:
				return
			case <-time.After(100 * time.Millisecond):
			}
			r := send(a.api, "GET", "/readyz", "", "", "")
			mu.Lock()
			probes = append(probes, probe{time.Now(), r.status, r.code()})
			mu.Unlock()
		}
	}()

	l.run(4, 7)
	time.Sleep(1500 * time.Millisecond)
	awayAt := time.Now()
	if restart {
		versions, _ := filepath.Glob("/etc/postgresql/*")
		if len(versions) == 0 {
			t.Fatal("no /etc/postgresql/<version>: cannot restart the cluster")
		}
		cmd := exec.Command("pg_ctlcluster", "--skip-systemctl-redirect", filepath.Base(versions[0]), "main", "restart")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pg_ctlcluster restart: %v\n%s", err, out)
		}
	} else {
		if _, err := admin.Exec(ctx, `ALTER DATABASE `+dbName+` ALLOW_CONNECTIONS false`); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE datname = $1 AND pid <> pg_backend_pid()`, dbName); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := admin.Exec(ctx, `ALTER DATABASE `+dbName+` ALLOW_CONNECTIONS true`); err != nil {
			t.Fatal(err)
		}
	}
	backAt := time.Now()
	waitReady(t, a.api, 60*time.Second)
	readyAt := time.Now()
	time.Sleep(1500 * time.Millisecond)
	l.pause()
	close(stopProbe)
	<-probed

	for _, r := range j.all() {
		if !r.settled() {
			r.retry(a.api, time.Now().Add(30*time.Second))
		}
	}
	if a.runs != 1 || !a.alive.Load() {
		t.Errorf("xaalis was restarted or died (%d runs)", a.runs)
	}
	a.stop()

	mu.Lock()
	unready := 0
	for _, p := range probes {
		if p.status != 200 {
			unready++
			if p.status != 503 || p.code != "service_unavailable" {
				t.Errorf("/readyz answered %d %s", p.status, p.code)
			}
		}
	}
	last := probes[len(probes)-1]
	mu.Unlock()
	if unready == 0 {
		t.Error("/readyz never went unready while the database was away")
	}
	if last.status != 200 {
		t.Errorf("/readyz ends %d", last.status)
	}
	checkOutcomes(t, j)
	f.tally(j)
	if f.Refused503 == 0 {
		t.Error("no request answered 503 while the database was away")
	}
	checkStore(t, b, j, f)
	f.Extra["away_seconds"] = backAt.Sub(awayAt).Round(100 * time.Millisecond).Seconds()
	f.Extra["ready_again_after_seconds"] = readyAt.Sub(backAt).Round(100 * time.Millisecond).Seconds()
	f.Extra["readyz_unready_probes"] = unready
	f.report()
}
