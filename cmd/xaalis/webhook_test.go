package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	pkgwebhook "github.com/xaalis/xaalis/pkg/webhook"
)

// TestServeDeliversWebhooks: a real serve (with --insecure-webhooks, for a
// loopback receiver) delivers a payment's event, signed, within seconds.
func TestServeDeliversWebhooks(t *testing.T) {
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer rc.Close()
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	m := createMerchant(t, db)
	s := serve(t, noEnv, serveArgs(db, "--insecure-webhooks")...)
	if !strings.Contains(s.stderr.String(), "insecure-webhooks") {
		t.Fatalf("no warning at start:\n%s", s.stderr)
	}
	key := m.Keys.SecretTest
	r := s.do(t, "POST", "/v1/webhook-endpoints", key, `{"url":"`+rc.URL+`/hook"}`).want(t, 201, "")
	var ep struct{ Data struct{ Secret string } }
	if err := json.Unmarshal(r.body, &ep); err != nil {
		t.Fatal(err)
	}
	s.do(t, "POST", "/v1/payments", key, `{"merchant_ref":"hook-1","amount":5000,"provider":"channel_a",
		"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://s.example/ok","failed_url":"https://s.example/ko"}`).want(t, 201, "")
	select {
	case req := <-got:
		body := <-bodies
		ev, err := pkgwebhook.ConstructEvent(body, req.Header.Get(pkgwebhook.Header), ep.Data.Secret)
		if err != nil || ev.Type != "payment.success" || ev.MerchantReference != "hook-1" {
			t.Fatalf("delivery: %v %+v", err, ev)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no webhook within 15 s")
	}

	// Without the flag, a loopback URL is refused.
	db2 := "sqlite://" + filepath.Join(t.TempDir(), "y.db")
	m2 := createMerchant(t, db2)
	s2 := serve(t, noEnv, serveArgs(db2)...)
	s2.do(t, "POST", "/v1/webhook-endpoints", m2.Keys.SecretTest, `{"url":"`+rc.URL+`/hook"}`).want(t, 422, "validation_error")
}
