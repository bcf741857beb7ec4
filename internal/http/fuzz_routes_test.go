package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// fuzzTarget is a real server on SQLite with one merchant and a record of
// every kind a POST route names in its path.
type fuzzTarget struct {
	url    string
	key    string
	routes []string // "POST /v1/...", path values filled in
	n      atomic.Int64
}

func newFuzzTarget(f *testing.F) *fuzzTarget {
	store, err := sqlite.Open(context.Background(), filepath.Join(f.TempDir(), "fuzz.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { store.Close() })
	app := xaalis.NewApp(store)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	app.Gateway = provider.New(app.Config, provider.Options{Logger: log,
		Notify: func(ctx context.Context, n xaalis.Notification) {
			_, _ = app.ApplyNotification(ctx, xaalis.ModeTest, n)
		}})
	cfg := xhttp.DefaultConfig()
	cfg.RateLimit, cfg.RateBurst, cfg.IdempotencyQuota = 1e9, 1e9, 0
	cfg.PageRateLimit, cfg.NotifyRateLimit = 0, 0
	h := xhttp.NewServer(app, log, cfg, api.OpenAPI, nil)
	srv := httptest.NewServer(h)
	f.Cleanup(srv.Close)
	app.BaseURL = srv.URL
	ctx := context.Background()
	_, keys, err := app.CreateMerchant(ctx, xaalis.MerchantCreate{Name: "Fuzz"})
	if err != nil {
		f.Fatal(err)
	}
	ft := &fuzzTarget{url: srv.URL, key: keys.SecretTest}
	post := func(path, body string) map[string]any {
		status, out := ft.post(path, body, "setup-"+fmt.Sprint(ft.n.Add(1)))
		if status >= 300 {
			f.Fatalf("setup %s: %d %s", path, status, out)
		}
		var env struct{ Data map[string]any }
		_ = json.Unmarshal(out, &env)
		return env.Data
	}
	pay := post("/v1/payments", `{"merchant_ref":"f-1","amount":50000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`)
	pending := post("/v1/payments", `{"merchant_ref":"f-2","amount":5000,"provider":"channel_b","payer":{"phone":"+221771234567"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`)
	disputed := post("/v1/payments", `{"merchant_ref":"f-3","amount":5000,"provider":"channel_a","payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`)
	d, err := app.OpenDispute(ctx, xaalis.DisputeOpen{TransactionID: disputed["id"].(string)})
	if err != nil {
		f.Fatal(err)
	}
	plan := post("/v1/plans", planBody)
	ep := post("/v1/webhook-endpoints", `{"url":"https://hooks.example/f"}`)
	cust := post("/v1/payments", `{"merchant_ref":"f-4","amount":5000,"payer":{"phone":"+221771234999"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`)
	sub := post("/v1/subscriptions", `{"plan_id":"`+plan["id"].(string)+`","customer_id":"`+cust["customer_id"].(string)+`"}`)
	evs, err := store.Events(ctx, pay["id"].(string))
	if err != nil || len(evs) == 0 {
		f.Fatalf("events: %v", err)
	}
	// The record each path value names, by the pattern's first segments.
	ids := []struct{ prefix, id string }{
		{"/v1/payments/{id}/splits", pay["id"].(string)},
		{"/v1/payments/{id}/", pending["id"].(string)},
		{"/v1/test-helpers/payments/{id}/", pending["id"].(string)},
		{"/v1/disputes/{id}/", d.ID},
		{"/v1/subscriptions/{id}/", sub["id"].(string)},
		{"/v1/plans/{id}/", plan["id"].(string)},
		{"/v1/webhook-endpoints/{id}/", ep["id"].(string)},
		{"/v1/events/{id}/", evs[0].ID},
		{"/checkout/{id}/", cust["id"].(string)},
		{"/v1/providers/{provider}/", "channel_a"},
	}
	for _, r := range h.Routes() {
		method, pattern, _ := strings.Cut(r.Pattern, " ")
		if method != "POST" {
			continue
		}
		path := pattern
		for _, x := range ids {
			if strings.HasPrefix(pattern, x.prefix) {
				path = strings.NewReplacer("{id}", x.id, "{provider}", x.id).Replace(pattern)
				break
			}
		}
		if strings.Contains(path, "{") {
			f.Fatalf("no record for %s", pattern)
		}
		ft.routes = append(ft.routes, path)
	}
	return ft
}

func (ft *fuzzTarget) post(path, body, idem string) (int, []byte) {
	req, err := http.NewRequest("POST", ft.url+path, bytes.NewReader([]byte(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+ft.key)
	req.Header.Set("Idempotency-Key", idem)
	res, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// FuzzPostRoutes drives arbitrary bodies through the real handler of every
// POST route (the API's, the hosted page's and the provider notifications'),
// on a real SQLite store: no answer is a 5xx of Xaalis's own. (502 and 503
// gateway_* answers are a provider's, which test mode gives on purpose for
// its magic numbers; they are allowed.)
func FuzzPostRoutes(f *testing.F) {
	ft := newFuzzTarget(f)
	seeds := []string{
		`{}`, `null`, `[]`, `{"merchant_ref":"ord-\u0000-1","amount":5000}`, `{"amount":"5000"}`, `{"amount":1e400}`,
		`{"amount":-1,"currency":"XOF"}`, `{"items":[{"beneficiary_merchant_id":"x","amount":1}]}`,
		`{"metadata":{"k":{"deep":[1,2,{"x":null}]}}}`, "{\"a\":\"\xff\"}", `{"outcome":"success"}`,
		`{"transaction_id":"TXN-AAAAAAAAAAAAAAAA","amount":1}`, `{"evidence":["https://x.example/a"],"merchant_response":"a\nb"}`,
		`{"url":"https://hooks.example/z","events":["*"]}`, `{"type":"payment.success","from":"2026-01-01"}`,
		`{"merchant_ref":"p","amount":100,"currency":"XOF","provider":"channel_a","recipient":{"phone":"+221771112233"}}`,
		`{"amount":1000,"currency":"XOF","destination_phone":"+221771112233"}`, `{"name":"Gold","amount":5000,"interval":"month"}`,
		`{"merchant_ref":"q","amount":9223372036854775807,"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`,
	}
	for i := range ft.routes {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := ft.routes[int(route)%len(ft.routes)]
		status, out := ft.post(path, string(body), fmt.Sprintf("fz-%d", ft.n.Add(1)))
		if status == 0 {
			t.Fatalf("POST %s %q: %s", path, body, out)
		}
		if status >= 500 {
			var env struct{ Error struct{ Code string } }
			_ = json.Unmarshal(out, &env)
			if (status == 502 || status == 503) && strings.HasPrefix(env.Error.Code, "gateway_") {
				return
			}
			t.Fatalf("POST %s %q: %d %s", path, body, status, out)
		}
	})
}
