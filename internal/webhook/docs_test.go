package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/webhook"
	"github.com/xaalis/xaalis/internal/xaalis"
	pkgwebhook "github.com/xaalis/xaalis/pkg/webhook"
)

// TestDocsNodeReceiver runs the Node.js receiver of docs/webhooks.md, as a
// merchant would copy it, and sends it signed deliveries: a receiver
// written against the docs alone works.
func TestDocsNodeReceiver(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not installed: the docs' Node.js receiver is not run")
	}
	doc, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```js\n")
	code, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no js block in docs/webhooks.md")
	}
	// The merchant's own work, which the doc leaves empty: print what is
	// fulfilled.
	var lines []string
	found := false
	for _, l := range strings.Split(code, "\n") {
		if strings.HasPrefix(l, "function fulfil(") {
			l, found = "function fulfil(e) { console.log('fulfil ' + e.data.id); }", true
		}
		lines = append(lines, l)
	}
	if !found {
		t.Fatal("docs/webhooks.md's receiver defines no function fulfil")
	}
	code = strings.Join(lines, "\n")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "receiver.js"), []byte(code), 0o600); err != nil {
		t.Fatal(err)
	}
	port := testutil.FreePort(t)
	secret := webhook.NewSecret()
	cmd := exec.Command(node, filepath.Join(dir, "receiver.js"))
	cmd.Env = append(os.Environ(), "XAALIS_WHSEC="+secret, "PORT="+strconv.Itoa(port))
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatalf("the receiver did not start: %s", out.String())
		}
		time.Sleep(25 * time.Millisecond)
	}

	ev := &xaalis.Event{ID: "0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506", Type: "payment.success", ObjectType: "transaction",
		ObjectID: "tx-1", Seq: 1, Mode: xaalis.ModeTest, CreatedAt: time.Now(),
		Data: []byte(`{"id":"tx-1","object":"transaction","merchant_ref":"ORDER-42","status":"success","metadata":{}}`)}
	send := func(format xaalis.PayloadFormat, secrets []string, at time.Time, tamper bool) int {
		body, err := webhook.Payload(format, ev)
		if err != nil {
			t.Fatal(err)
		}
		sig := pkgwebhook.Sign(body, secrets, at)
		if tamper {
			body = bytes.Replace(body, []byte("ORDER-42"), []byte("ORDER-43"), 1)
		}
		req, _ := http.NewRequestWithContext(context.Background(), "POST", url, bytes.NewReader(body))
		req.Header.Set(pkgwebhook.Header, sig)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	now := time.Now()
	for _, c := range []struct {
		name   string
		status int
		f      xaalis.PayloadFormat
		secs   []string
		at     time.Time
		tamper bool
	}{
		{"OK2026", 200, xaalis.Format20260601, []string{secret}, now, false},
		{"OKDuplicateNotFulfilledTwice", 200, xaalis.Format20260601, []string{secret}, now, false},
		{"OKLegacySameEventID", 200, xaalis.FormatLegacy, []string{secret}, now, false},
		{"OKRotationTwoSignatures", 200, xaalis.Format20260601, []string{"whsec_new_one", secret}, now, false},
		{"ErrTampered", 400, xaalis.Format20260601, []string{secret}, now, true},
		{"ErrStale", 400, xaalis.Format20260601, []string{secret}, now.Add(-10 * time.Minute), false},
		{"ErrWrongSecret", 400, xaalis.Format20260601, []string{"whsec_other"}, now, false},
	} {
		if got := send(c.f, c.secs, c.at, c.tamper); got != c.status {
			t.Errorf("%s: %d, want %d (receiver output: %s)", c.name, got, c.status, out.String())
		}
	}
	time.Sleep(100 * time.Millisecond)
	var fulfilled int
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	for sc.Scan() {
		if sc.Text() == "fulfil "+ev.ID {
			fulfilled++
		}
	}
	if fulfilled != 1 {
		t.Fatalf("fulfilled %d times, want once:\n%s", fulfilled, out.String())
	}
}

// TestDocsEventTypes: the guide's "Event types" names every event an
// endpoint may subscribe to, so a merchant choosing `events` from it
// misses none.
func TestDocsEventTypes(t *testing.T) {
	doc, err := os.ReadFile("../../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Event types\n")
	if !ok {
		t.Fatal("no Event types section in docs/webhooks.md")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, typ := range xaalis.EventTypes {
		if !strings.Contains(section, "`"+typ+"`") {
			t.Errorf("docs/webhooks.md's Event types does not name %s", typ)
		}
	}
}
