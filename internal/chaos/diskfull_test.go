package chaos_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDiskFull runs SQLite on a tmpfs the test mounts, under load,
// and fills it: writes answer 503 service_unavailable (with Retry-After,
// never a 500) while reads keep answering 200; once space returns, writes
// resume without a restart, every request retried has one outcome, and
// PRAGMA integrity_check is ok.
func TestDiskFull(t *testing.T) {
	needChaos(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs (the chaos suite runs as root): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	b := sqliteBackend(t, dir)
	f := newFigures(t, "disk_full", b.name)
	if _, err := cli(t, "migrate", "--database-url", b.url); err != nil {
		t.Fatal(err)
	}
	m := newMerchant(t, b.url, "Full shop")
	ben := newMerchant(t, b.url, "Full seller")
	debtor := newMerchant(t, b.url, "Full debtor")
	a := newServer(t, "server", b.url, nil)
	a.start()
	j := &journal{}
	l := newLoad(t, m, ben.ID, debtor, nil, j)
	l.setBase(a.api)
	l.fund(a.api, false)
	l.life.Add(1)
	l.run(3, 11)
	time.Sleep(time.Second)

	// Fill the filesystem.
	filler := filepath.Join(dir, "filler")
	fh, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill: %v", err)
			}
			break
		}
	}
	fh.Close()
	fullAt := len(j.all())

	// While full: reads answer, through the API.
	var reads, readFails int
	var readMu sync.Mutex
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, path := range []string{"/v1/balance", "/v1/payments?per_page=5"} {
			r := send(a.api, "GET", path, m.Keys.SecretTest, "", "")
			readMu.Lock()
			reads++
			if r.status != 200 {
				readFails++
				t.Errorf("read %s on a full disk: %d %s", path, r.status, r.body)
			}
			readMu.Unlock()
		}
	}
	full := j.all()[fullAt:]
	var refused, written int
	for _, r := range full {
		switch {
		case r.first.status == 503 && r.first.code() == "service_unavailable":
			refused++
		case r.first.status >= 200 && r.first.status < 300:
			written++
		}
	}
	readyz := send(a.api, "GET", "/readyz", "", "", "")
	if refused == 0 {
		t.Fatalf("no write answered 503 on a full disk (%d requests, %d written)", len(full), written)
	}
	// Space returns: writes resume without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitReady(t, a.api, 30*time.Second)
	time.Sleep(time.Second)
	l.pause()
	// One deadline for all the retries: a server that does not recover
	// fails the test in 30 s, not 30 s per request.
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range j.all() {
		if !r.settled() {
			r.retry(a.api, deadline)
			if !r.settled() {
				t.Errorf("%s %s (key %s) has no outcome once space returned: %d %v %s", r.method, r.path, r.idem, r.final.status, r.final.err, r.final.body)
			}
		}
	}
	if t.Failed() {
		out, _ := exec.Command("sh", "-c", "df -k "+dir+"; ls -la "+dir).CombinedOutput()
		t.Logf("the filesystem:\n%s", out)
	}
	after := &request{op: "payment", method: "POST", path: "/v1/payments", key: m.Keys.SecretTest, idem: uniq("after"),
		body: paymentBody(uniq("after"), 1000, "channel_a", "+221770000001")}
	after.first = must(t, "a payment once space returned", send(a.api, after.method, after.path, after.key, after.idem, after.body), 201)
	after.final = after.first
	j.add(after)
	if a.runs != 1 || !a.alive.Load() {
		t.Errorf("xaalis was restarted or died (%d runs)", a.runs)
	}
	a.stop()

	checkOutcomes(t, j)
	f.tally(j)
	checkStore(t, b, j, f)
	v := newVerifier(t, b)
	if got := v.rows(`PRAGMA integrity_check`); len(got) != 1 || got[0][0] != "ok" {
		t.Errorf("integrity_check: %v", got)
	}
	var msgs []string
	for _, r := range full {
		if r.first.status == 503 {
			var env struct{ Error struct{ Message string } }
			_ = jsonUnmarshal(r.first.body, &env)
			if !strings.Contains(strings.Join(msgs, "|"), env.Error.Message) {
				msgs = append(msgs, env.Error.Message)
			}
		}
	}
	f.Extra["while_full"] = map[string]any{"requests": len(full), "refused_503": refused, "written": written,
		"reads": reads, "reads_failed": readFails, "readyz": readyz.status, "messages": msgs}
	f.report()
}
