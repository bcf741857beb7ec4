package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	pkgwebhook "github.com/xaalis/xaalis/pkg/webhook"
)

// rawDatabase returns the bytes the database keeps: the SQLite file and
// its write-ahead log, or the text of the PostgreSQL tables that hold
// secrets (bytea in hex).
func rawDatabase(t *testing.T, db string) []byte {
	t.Helper()
	if strings.HasPrefix(db, "sqlite:") {
		path, err := sqlite.ParseURL(db)
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		for _, p := range []string{path, path + "-wal"} {
			b, err := os.ReadFile(p)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
		return out
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var out []byte
	for _, table := range []string{"webhook_endpoints", "webhook_callback_secrets", "idempotency_keys", "settings"} {
		var text *string
		if err := conn.QueryRow(ctx, `SELECT string_agg(r::text, E'\n') FROM `+table+` AS r`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		if text != nil {
			out = append(out, *text...)
		}
	}
	return out
}

// wantNotInDatabase fails when the raw database holds one of the secrets
// in clear (as text, or hex).
func wantNotInDatabase(t *testing.T, db string, secrets ...string) {
	t.Helper()
	raw := rawDatabase(t, db)
	if len(raw) == 0 {
		t.Fatal("the raw database is empty")
	}
	for _, s := range secrets {
		if s == "" {
			t.Fatal("an empty secret")
		}
		if bytes.Contains(raw, []byte(s)) || bytes.Contains(raw, []byte(hex.EncodeToString([]byte(s)))) {
			t.Fatalf("the database holds the secret %s in clear", s)
		}
	}
}

// receiver collects webhook deliveries by path.
type receiver struct {
	srv   *httptest.Server
	got   chan secretDelivery
	stash []secretDelivery // received, not yet asked for
}

type secretDelivery struct {
	path, signature string
	body            []byte
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{got: make(chan secretDelivery, 16)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rc.got <- secretDelivery{r.URL.Path, r.Header.Get(pkgwebhook.Header), b}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// next waits for a delivery to path and checks its signature with secret.
func (rc *receiver) next(t *testing.T, path, secret, typ string) {
	t.Helper()
	check := func(d secretDelivery) {
		t.Helper()
		ev, err := pkgwebhook.ConstructEvent(d.body, d.signature, secret)
		if err != nil || ev.Type != typ {
			t.Fatalf("delivery to %s: %v %+v", path, err, ev)
		}
	}
	for i, d := range rc.stash {
		if d.path == path {
			rc.stash = append(rc.stash[:i], rc.stash[i+1:]...)
			check(d)
			return
		}
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case d := <-rc.got:
			if d.path != path {
				rc.stash = append(rc.stash, d)
				continue
			}
			check(d)
			return
		case <-deadline:
			t.Fatalf("no delivery to %s within 20 s", path)
		}
	}
}

// TestSecretsAtRest: the database never holds a webhook secret in clear
// (endpoint, previous, callback, or the stored answer that showed it);
// `xaalis secrets rotate` re-encrypts them under a new key while the server
// runs, and deliveries still verify; a wrong key file refuses to start.
func TestSecretsAtRest(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		keyFile := filepath.Join(t.TempDir(), "keys", "secret.key")
		env := envOf("XAALIS_SECRET_KEY_FILE", keyFile)
		// A key file that does not exist yet is made, with one key.
		_, errOut, err := cli(t, env, "migrate", "--database-url", db)
		if err != nil || !strings.Contains(errOut, "made the secret key file "+keyFile) {
			t.Fatalf("a missing key file: %v %s", err, errOut)
		}
		if st, _ := os.Stat(keyFile); st == nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode: %v", st)
		}
		m := createMerchant(t, db)
		key := m.Keys.SecretTest
		rc := newReceiver(t)
		s := serve(t, env, serveArgs(db, "--insecure-webhooks")...)

		var ep struct{ Data struct{ ID, Secret string } }
		r := s.do(t, "POST", "/v1/webhook-endpoints", key, `{"url":"`+rc.srv.URL+`/hook"}`).want(t, 201, "")
		if err := json.Unmarshal(r.body, &ep); err != nil || !strings.HasPrefix(ep.Data.Secret, "whsec_") {
			t.Fatalf("endpoint: %s", r.body)
		}
		var cb struct{ Data struct{ Secret string } }
		if err := json.Unmarshal(s.do(t, "GET", "/v1/webhooks/callback-secret", key, "").want(t, 200, "").body, &cb); err != nil {
			t.Fatal(err)
		}
		pay := func(ref string) {
			s.do(t, "POST", "/v1/payments", key, `{"merchant_ref":"`+ref+`","amount":5000,"provider":"channel_a",
				"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"callback_url":"`+rc.srv.URL+`/cb",
				"success_url":"https://s.example/ok","failed_url":"https://s.example/ko"}`).want(t, 201, "")
			rc.next(t, "/hook", ep.Data.Secret, "payment.success")
			rc.next(t, "/cb", cb.Data.Secret, "payment.success")
		}
		pay("order-1")
		wantNotInDatabase(t, db, ep.Data.Secret, cb.Data.Secret)

		// Rotation while the server runs.
		var before struct {
			Keys []struct {
				ID      string
				Current bool
				Secrets int
			}
		}
		if err := json.Unmarshal([]byte(mustCLI(t, env, "secrets", "status", "--database-url", db, "--json")), &before); err != nil ||
			len(before.Keys) != 1 || !before.Keys[0].Current || before.Keys[0].Secrets < 3 {
			t.Fatalf("status before: %+v %v", before, err)
		}
		out := mustCLI(t, env, "secrets", "rotate", "--database-url", db)
		if !strings.Contains(out, "Re-encrypted") || !strings.Contains(out, before.Keys[0].ID) {
			t.Fatalf("rotate: %s", out)
		}
		var after struct {
			Keys []struct {
				ID      string
				Current bool
				Secrets int
			}
			OK bool
		}
		if err := json.Unmarshal([]byte(mustCLI(t, env, "secrets", "status", "--database-url", db, "--json")), &after); err != nil ||
			len(after.Keys) != 2 || after.Keys[0].Secrets != 0 || after.Keys[0].Current || !after.Keys[1].Current ||
			after.Keys[1].Secrets != before.Keys[0].Secrets || !after.OK {
			t.Fatalf("status after: %+v %v", after, err)
		}
		// The running server reads the new key from the file, for old
		// secrets and new ones alike.
		pay("order-2")
		var rotated struct{ Data struct{ Secret string } }
		if err := json.Unmarshal(s.do(t, "POST", "/v1/webhook-endpoints/"+ep.Data.ID+"/rotate-secret", key, `{"grace_period":0}`).
			want(t, 200, "").body, &rotated); err != nil {
			t.Fatal(err)
		}
		s.do(t, "POST", "/v1/webhooks/test", key, `{}`).want(t, 201, "")
		rc.next(t, "/hook", rotated.Data.Secret, "webhook.test")
		wantNotInDatabase(t, db, ep.Data.Secret, rotated.Data.Secret, cb.Data.Secret)
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}

		// A key file without the database's key refuses to start, clearly.
		other := filepath.Join(t.TempDir(), "other.key")
		mustCLI(t, envOf("XAALIS_SECRET_KEY_FILE", other), "secrets", "add-key")
		_, _, err = cli(t, envOf("XAALIS_SECRET_KEY_FILE", other), append([]string{"serve"}, serveArgs(db)...)...)
		if err == nil || !strings.Contains(err.Error(), "wrong secret key file") || !strings.Contains(err.Error(), after.Keys[1].ID) {
			t.Fatalf("serve with a wrong key file: %v", err)
		}
		if _, _, err := cli(t, envOf("XAALIS_SECRET_KEY_FILE", other), "secrets", "status", "--database-url", db); err == nil {
			t.Fatal("status with a wrong key file succeeded")
		}
		// With the right one it starts again, and the secrets still sign.
		s = serve(t, env, serveArgs(db, "--insecure-webhooks")...)
		s.do(t, "POST", "/v1/webhooks/test", key, `{}`).want(t, 201, "")
		rc.next(t, "/hook", rotated.Data.Secret, "webhook.test")
	})
}

// TestSecretKeyFileInDataDirectory: without XAALIS_SECRET_KEY_FILE the key
// file is made beside the SQLite database, with a warning at every start.
func TestSecretKeyFileInDataDirectory(t *testing.T) {
	dir := t.TempDir()
	db := "sqlite://" + filepath.Join(dir, "x.db")
	env := envOf("XAALIS_SECRET_KEY_FILE", "")
	s := serve(t, env, serveArgs(db)...)
	sk, _ := s.demoKeys(t)
	r := s.do(t, "POST", "/v1/webhook-endpoints", sk, `{"url":"https://hooks.example/x"}`).want(t, 201, "")
	var ep struct{ Data struct{ Secret string } }
	if err := json.Unmarshal(r.body, &ep); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "secret.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if !strings.Contains(s.stderr.String(), "made a secret key file") {
		t.Fatalf("no warning:\n%s", s.stderr)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	wantNotInDatabase(t, db, ep.Data.Secret)
	s = serve(t, env, serveArgs(db)...)
	if !strings.Contains(s.stderr.String(), "beside the database") {
		t.Fatalf("no warning at the second start:\n%s", s.stderr)
	}
	if out := mustCLI(t, env, "secrets", "status", "--database-url", db); !strings.Contains(out, filepath.Join(dir, "secret.key")) {
		t.Fatalf("status: %s", out)
	}
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	// A key file named but missing, for a database whose secrets are
	// encrypted: refused, and not made (a new key would read nothing).
	missing := filepath.Join(t.TempDir(), "missing.key")
	for _, args := range [][]string{append([]string{"serve"}, serveArgs(db)...), {"operator", "token", "create", "--database-url", db}} {
		stdout, stderr, err := cli(t, envOf("XAALIS_SECRET_KEY_FILE", missing), args...)
		if err == nil || !strings.Contains(err.Error()+stderr, "no secret key file at "+missing) {
			t.Fatalf("%v with a missing key file: %v\n%s%s", args[0], err, stdout, stderr)
		}
		if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%v made the missing key file: %v", args[0], err)
		}
	}
}
