package storetest

import (
	"bytes"
	"context"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/secrets"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// Dumper is a store that returns the raw bytes it keeps: the database
// file (SQLite), or every row of every table (PostgreSQL), for the checks
// that a secret never reaches them in clear.
type Dumper interface {
	DumpRaw(ctx context.Context) ([]byte, error)
}

// WantNoSecretsInClear fails t when the raw database holds any of the
// secrets, as text or as hex (bytea columns are dumped in hex).
func WantNoSecretsInClear(t testing.TB, s xaalis.Store, secrets ...string) {
	t.Helper()
	d, ok := s.(Dumper)
	if !ok {
		t.Fatalf("%T cannot dump its raw bytes", s)
	}
	raw, err := d.DumpRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		t.Fatal("the raw dump is empty")
	}
	for _, sec := range secrets {
		if bytes.Contains(raw, []byte(sec)) || bytes.Contains(bytes.ToLower(raw), []byte(hex.EncodeToString([]byte(sec)))) {
			t.Fatalf("the database holds the secret %q in clear", sec)
		}
	}
}

// testSecrets: endpoint secrets, callback secrets and stored answers that
// show a secret are sealed at rest under the current key, read in clear,
// moved to a new key by ResealSecrets after UseSecretKey, and unreadable
// without their key or outside their row; secrets stored in clear before
// are read, counted and sealed.
func testSecrets(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "secret.key")
	kr, err := secrets.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	s.SetSecretBox(kr)
	first := kr.Newest()
	m := NewMerchant(t, s)

	w := newEndpoint(m, xaalis.ModeTest, t0)
	exp := t0.Add(time.Hour)
	w.PreviousSecret, w.PreviousExpiresAt = "whsec_previous"+xaalis.NewUUIDv7(), &exp
	insertEndpoint(t, s, w)
	other := newEndpoint(m, xaalis.ModeTest, t0)
	insertEndpoint(t, s, other)
	fresh := "whsec_callback" + xaalis.NewUUIDv7()
	cb, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeLive, fresh)
	if err != nil || cb != fresh {
		t.Fatalf("callback secret %q, %v", cb, err)
	}
	listen := "whsec_listen" + xaalis.NewUUIDv7()
	if ls, err := s.ListenSecret(ctx, m.ID, xaalis.ModeTest, listen); err != nil || ls != listen {
		t.Fatalf("listen secret %q, %v", ls, err)
	}
	sc := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "create-endpoint"}
	if r, err := s.ClaimIdempotency(ctx, claim(sc, "fp", "a", t0)); err != nil || r.Outcome != xaalis.ClaimAcquired {
		t.Fatalf("claim: %+v %v", r, err)
	}
	answer := []byte(`{"data":{"secret":"` + w.Secret + `"}}` + "\n")
	if err := s.Update(ctx, func(tx xaalis.Tx) error {
		return tx.CompleteIdempotency(ctx, sc, "a", xaalis.StoredResponse{Status: 201, ContentType: "application/json", Body: answer, Secret: true})
	}); err != nil {
		t.Fatal(err)
	}

	readable := func(stage string) {
		t.Helper()
		got, err := s.WebhookEndpoint(ctx, m.ID, w.ID)
		if err != nil || got.Secret != w.Secret || got.PreviousSecret != w.PreviousSecret {
			t.Fatalf("%s: endpoint %+v, %v", stage, got, err)
		}
		var list []*xaalis.WebhookEndpoint
		err = s.Update(ctx, func(tx xaalis.Tx) (err error) {
			list, err = tx.ActiveWebhookEndpoints(ctx, m.ID, xaalis.ModeTest)
			return err
		})
		if err != nil || len(list) != 2 || list[0].Secret != w.Secret || list[1].Secret != other.Secret {
			t.Fatalf("%s: active endpoints %v", stage, err)
		}
		if cb, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeLive, "whsec_unused"); err != nil || cb != fresh {
			t.Fatalf("%s: callback secret %q, %v", stage, cb, err)
		}
		if ls, err := s.ListenSecret(ctx, m.ID, xaalis.ModeTest, "whsec_unused"); err != nil || ls != listen {
			t.Fatalf("%s: listen secret %q, %v", stage, ls, err)
		}
		r, err := s.ClaimIdempotency(ctx, claim(sc, "fp", "b", t0.Add(time.Second)))
		if err != nil || r.Outcome != xaalis.ClaimReplay || !bytes.Equal(r.Response.Body, answer) {
			t.Fatalf("%s: replay %+v %v", stage, r, err)
		}
	}
	readable("sealed")
	WantNoSecretsInClear(t, s, w.Secret, w.PreviousSecret, other.Secret, fresh, listen)
	usage := func() xaalis.SecretKeyUsage {
		t.Helper()
		u, err := s.SecretKeys(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if u := usage(); u.Current != first || u.Sealed[first] != 6 || len(u.Sealed) != 1 || u.Clear != 0 {
		t.Fatalf("usage %+v, want 6 under %s", u, first)
	}

	// Rotation: a new key in the file, made current, then every secret
	// sealed again under it, a few at a time.
	second, err := secrets.AddKey(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UseSecretKey(ctx, "0123456789abcdef"); err == nil {
		t.Fatal("a key the file does not hold was made current")
	}
	if err := s.UseSecretKey(ctx, second); err != nil {
		t.Fatal(err)
	}
	total := 0
	for range 10 {
		n, err := s.ResealSecrets(ctx, 2, false)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if u := usage(); total != 5 || u.Current != second || u.Sealed[second] != 6 || len(u.Sealed) != 1 {
		t.Fatalf("after rotation (%d resealed): %+v", total, u)
	}
	readable("rotated")
	WantNoSecretsInClear(t, s, w.Secret, w.PreviousSecret, other.Secret, fresh, listen)
	// New secrets are sealed under the new key.
	third := newEndpoint(m, xaalis.ModeLive, t0)
	insertEndpoint(t, s, third)
	if u := usage(); u.Sealed[second] != 7 {
		t.Fatalf("a new secret: %+v", u)
	}

	// A sealed value copied to another row does not open there.
	if err := ExecRaw(t, s, `UPDATE webhook_endpoints SET secret = (SELECT secret FROM webhook_endpoints WHERE id = '`+w.ID+`')
		WHERE id = '`+other.ID+`'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.WebhookEndpoint(ctx, m.ID, other.ID); err == nil {
		t.Fatal("another endpoint's sealed secret opened")
	}
	// Without the key, nothing opens.
	stranger, err := secrets.Create(filepath.Join(t.TempDir(), "other.key"))
	if err != nil {
		t.Fatal(err)
	}
	s.SetSecretBox(stranger)
	if _, err := s.WebhookEndpoint(ctx, m.ID, w.ID); err == nil {
		t.Fatal("an endpoint secret opened under another key file")
	}
	if _, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeLive, "x"); err == nil {
		t.Fatal("a callback secret opened under another key file")
	}
	s.SetSecretBox(nil)
	if _, err := s.WebhookEndpoint(ctx, m.ID, w.ID); err == nil {
		t.Fatal("an endpoint secret opened without a key file")
	}

	// Secrets stored in clear (before encryption at rest) are read as
	// they are, counted, and sealed.
	sc2 := xaalis.IdempotencyScope{MerchantID: m.ID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: "old-answer"}
	if _, err := s.ClaimIdempotency(ctx, claim(sc2, "fp", "a", t0)); err != nil {
		t.Fatal(err)
	}
	oldAnswer := []byte(`{"data":{"secret":"whsec_oldanswer"}}`)
	if err := s.CompleteIdempotency(ctx, sc2, "a", xaalis.StoredResponse{Status: 201, Body: oldAnswer, Secret: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeTest, "whsec_oldcallback"); err != nil {
		t.Fatal(err)
	}
	s.SetSecretBox(kr)
	// As in a database from before encryption at rest: its answers in
	// clear were never scanned.
	// Its migrations rebuilt tables, leaving copies of rows in the file's
	// free space (SQLite).
	for _, stmt := range []string{`DELETE FROM webhook_endpoints WHERE id = '` + other.ID + `'`,
		`DELETE FROM settings WHERE name = 'secrets_clear_answers_sealed'`,
		`CREATE TABLE rebuilt AS SELECT * FROM idempotency_keys`, `DROP TABLE rebuilt`} {
		if err := ExecRaw(t, s, stmt); err != nil {
			t.Fatal(err)
		}
	}
	if cb, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeTest, "x"); err != nil || cb != "whsec_oldcallback" {
		t.Fatalf("a callback secret in clear: %q %v", cb, err)
	}
	if u := usage(); u.Clear != 2 {
		t.Fatalf("secrets in clear: %+v", u)
	}
	if n, err := s.ResealSecrets(ctx, 100, true); err != nil || n != 2 {
		t.Fatalf("sealing the secrets in clear: %d %v", n, err)
	}
	if n, err := s.ResealSecrets(ctx, 100, true); err != nil || n != 0 {
		t.Fatalf("sealing again: %d %v", n, err)
	}
	if u := usage(); u.Clear != 0 || u.Sealed[second] != 8 {
		t.Fatalf("after sealing: %+v", u)
	}
	if cb, err := s.CallbackSecret(ctx, m.ID, xaalis.ModeTest, "x"); err != nil || cb != "whsec_oldcallback" {
		t.Fatalf("a sealed former clear callback secret: %q %v", cb, err)
	}
	if r, err := s.ClaimIdempotency(ctx, claim(sc2, "fp", "b", t0.Add(time.Second))); err != nil || !bytes.Equal(r.Response.Body, oldAnswer) {
		t.Fatalf("replay of a sealed former clear answer: %+v %v", r, err)
	}
	WantNoSecretsInClear(t, s, "whsec_oldanswer", "whsec_oldcallback")
}
