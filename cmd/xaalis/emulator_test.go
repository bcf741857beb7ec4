package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

var emulatorListening = regexp.MustCompile(`Provider emulator listening on (http://\S+)`)

// TestProviderEmulatorLive runs xaalis provider-emulator and a live-only
// xaalis serve configured to reach it: a live payment goes pending at the
// emulator, the payer acts through the emulator's control API, and its
// signed notification settles the payment.
func TestProviderEmulatorLive(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	out := &testutil.SyncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"provider-emulator", "--addr", "127.0.0.1:0", "--down", "channel_a/direct"}, envOf(), out, &testutil.SyncBuffer{})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("provider-emulator: %v", err)
		}
	})
	var emu string
	for deadline := time.Now().Add(10 * time.Second); emu == ""; time.Sleep(5 * time.Millisecond) {
		if m := emulatorListening.FindStringSubmatch(out.String()); m != nil {
			emu = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listening line: %s", out)
		}
	}

	// The development flow's configuration, as the emulator prints it: the
	// embedded one with every route at this emulator and its credentials.
	cfg := &testutil.SyncBuffer{}
	if err := run(ctx, []string{"provider-emulator", "--print-config", "--addr", strings.TrimPrefix(emu, "http://")}, envOf(), cfg, &testutil.SyncBuffer{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cfg.String(), emu+"/channel_a/direct") || !strings.Contains(cfg.String(), xaalis.EmulatorNotifySecret("channel_b")) {
		t.Fatalf("--print-config: %s", cfg)
	}
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	m := createMerchant(t, db)
	updateMerchant(t, db, m.MerchantID, "--kyc", "approved")
	// The notification URL must reach this server, whose address is known
	// only once it listens: a proxy that holds its own port forwards to it.
	// (Restarting the server on the address it had let another test's
	// connection take the port in between.)
	var target atomic.Pointer[url.URL]
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target.Load()) }})
	defer proxy.Close()
	s := serve(t, envOf(), serveArgs(db, "--test-mode=false", "--config", cfgPath, "--jobs-interval", "1h",
		"--public-url", proxy.URL)...)
	api, err := url.Parse(s.api)
	if err != nil {
		t.Fatal(err)
	}
	target.Store(api)

	body := `{"merchant_ref":"emu-1","amount":5000,"provider":"channel_a","payer":{"phone":"+221771234567"},
		"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`
	r := s.do(t, "POST", "/v1/payments", m.Keys.SecretLive, body).want(t, 201, "")
	var p struct {
		Data struct {
			ID, Status string
			Route      struct{ Name, Reason string }
		}
	}
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Data.Status != "pending" || p.Data.Route.Name != "aggregator" || !strings.Contains(p.Data.Route.Reason, "failover") {
		t.Fatalf("live payment through the emulator (direct is down): %s", r.body)
	}
	// Find the emulator's collection and act as the payer.
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Get(emu + "/_control")
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /_control: %v %v", res, err)
	}
	res.Body.Close()
	tx := lookupProviderRef(t, db, p.Data.ID)
	res, err = c.Post(emu+"/_control/collections/"+tx+"/payer", "application/json", strings.NewReader(`{"outcome":"success"}`))
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("payer: %v %v", res, err)
	}
	res.Body.Close()
	r = s.do(t, "GET", "/v1/payments/"+p.Data.ID, m.Keys.SecretLive, "").want(t, 200, "")
	if !strings.Contains(string(r.body), `"status":"success"`) {
		t.Fatalf("after the provider's notification: %s", r.body)
	}
}

// lookupProviderRef reads the provider's id of a transaction from the
// database, as an operator would.
func lookupProviderRef(t *testing.T, db, id string) string {
	t.Helper()
	s, err := openStoreOnly(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tx, err := s.Transaction(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return tx.ProviderRef
}
