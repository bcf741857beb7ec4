package xaalis_test

import (
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

var update = flag.Bool("update", false, "rewrite docs/errors.md from the catalogue")

func TestErrorDocs(t *testing.T) {
	const path = "../../docs/errors.md"
	want := xaalis.ErrorsMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/errors.md drifted from the error catalogue; run: go test ./internal/xaalis -run TestErrorDocs -update")
	}
	for _, e := range xaalis.Catalogue {
		if !strings.Contains(want, "### "+string(e.Code)+"\n") {
			t.Errorf("no anchor for %s", e.Code)
		}
	}
}

func TestCatalogue(t *testing.T) {
	// Every code of the specification's tables, with its status where the
	// specification gives one.
	spec := map[xaalis.Code]int{
		"missing_credentials": 401, "invalid_api_key": 401, "unauthorized": 401, "ip_not_allowed": 401,
		"test_key_in_production": 401, "scope_insufficient": 403, "livemode_mismatch": 403, "forbidden": 403,
		"idempotency_key_required": 400, "idempotency_key_too_long": 400, "idempotency_conflict": 409,
		"validation_error": 422, "merchant_inactive": 422, "merchant_kyc_required": 422, "payouts_disabled": 422,
		"provider_unavailable": 422, "provider_country_unsupported": 422, "provider_payout_unsupported": 422,
		"merchant_provider_not_authorized": 422, "amount_must_be_positive": 422, "amount_below_merchant_minimum": 422,
		"amount_below_provider_minimum": 422, "amount_above_merchant_maximum": 422, "daily_limit_exceeded": 422,
		"merchant_limit_exceeded": 422, "bceao_limit_exceeded": 422, "invalid_phone_number": 422,
		"insufficient_balance": 422, "fees_unavailable": 422,
		"transaction_not_found": 404, "transaction_not_refundable": 0, "non_payment_transaction_refund": 0,
		"transaction_already_fully_refunded": 0, "refund_exceeds_refundable": 0, "refund_not_supported": 0,
		"split_items_required": 0, "non_payment_transaction_split": 0, "transaction_not_splittable": 0,
		"split_total_exceeds_transaction": 0, "splits_exceed_transaction_amount": 0, "beneficiary_not_active": 0,
		"subscription_plan_not_available": 0, "subscription_customer_mismatch": 0, "subscription_already_in_status": 0,
		"invalid_signature": 401, "duplicate": 200, "provider_unavailable_webhook": 404,
		"gateway_unavailable": 503, "gateway_error": 502, "not_found": 404, "method_not_allowed": 405,
		"too_many_requests": 429, "api_error": 500,
	}
	for code, status := range spec {
		e, ok := xaalis.Lookup(code)
		if !ok {
			t.Errorf("%s is missing from the catalogue", code)
			continue
		}
		if status != 0 && e.Status != status {
			t.Errorf("%s: status %d, the specification says %d", code, e.Status, status)
		}
		if e.Message == "" {
			t.Errorf("%s has no message", code)
		}
	}
}

func TestAmountDecimal(t *testing.T) {
	for _, c := range []struct {
		minor int64
		want  string
	}{{500000, "5000.00"}, {1, "0.01"}, {0, "0.00"}, {-150, "-1.50"}, {123456789, "1234567.89"}} {
		a := xaalis.Amount{Minor: c.minor, Currency: xaalis.XOF}
		if got := a.Decimal(); got != c.want {
			t.Errorf("%d: %q, want %q", c.minor, got, c.want)
		}
		back, err := xaalis.ParseDecimal(c.want, xaalis.XOF)
		if err != nil || back != a {
			t.Errorf("ParseDecimal(%q) = %v, %v", c.want, back, err)
		}
	}
	for _, bad := range []string{"", "1.234", ".5", "abc", "1e3", "99999999999999999999"} {
		if _, err := xaalis.ParseDecimal(bad, xaalis.XOF); err == nil {
			t.Errorf("ParseDecimal(%q) accepted", bad)
		}
	}
}

func TestKeys(t *testing.T) {
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		t      xaalis.KeyType
		m      xaalis.Mode
		prefix string
	}{{xaalis.KeySecret, xaalis.ModeTest, "sk_test_"}, {xaalis.KeySecret, xaalis.ModeLive, "sk_live_"},
		{xaalis.KeyPublishable, xaalis.ModeTest, "pk_test_"}, {xaalis.KeyPublishable, xaalis.ModeLive, "pk_live_"}} {
		k, secret := xaalis.NewKey("id", "m", c.t, c.m, xaalis.AllScopes, nil, nil, []byte("p"), now)
		if !strings.HasPrefix(secret, c.prefix) || len(secret) != len(c.prefix)+32 {
			t.Errorf("secret %q", secret)
		}
		if string(k.Hash) == secret || strings.Contains(string(k.Hash), secret[8:]) {
			t.Error("the secret is stored")
		}
		typ, mode, ok := xaalis.ParseKeyPrefix(secret)
		if !ok || typ != c.t || mode != c.m {
			t.Errorf("ParseKeyPrefix(%q) = %v %v %v", secret, typ, mode, ok)
		}
		if c.t == xaalis.KeyPublishable && (len(k.Scopes) != 0 || k.HasScope(xaalis.ScopeReadTransactions)) {
			t.Error("a publishable key carries scopes")
		}
	}
	_, s1 := xaalis.NewKey("a", "m", xaalis.KeySecret, xaalis.ModeTest, nil, nil, nil, []byte("p"), now)
	_, s2 := xaalis.NewKey("b", "m", xaalis.KeySecret, xaalis.ModeTest, nil, nil, nil, []byte("p"), now)
	if s1 == s2 {
		t.Fatal("two keys are equal")
	}
	if string(xaalis.HashKey([]byte("p1"), s1)) == string(xaalis.HashKey([]byte("p2"), s1)) {
		t.Fatal("the hash ignores the pepper")
	}
	exp := now.Add(time.Hour)
	k := &xaalis.Key{ExpiresAt: &exp}
	if !k.Usable(now) || k.Usable(exp) {
		t.Error("expiry")
	}
	k.RevokedAt = &now
	if k.Usable(now) {
		t.Error("revocation")
	}
}

func TestFingerprint(t *testing.T) {
	base := xaalis.Fingerprint("POST", "/v1/plans", "", []byte(`{"a":1}`))
	for _, other := range [][]byte{
		xaalis.Fingerprint("PUT", "/v1/plans", "", []byte(`{"a":1}`)),
		xaalis.Fingerprint("POST", "/v1/plan", "", []byte(`{"a":1}`)),
		xaalis.Fingerprint("POST", "/v1/plans", "x=1", []byte(`{"a":1}`)),
		xaalis.Fingerprint("POST", "/v1/plans", "", []byte(`{"a":2}`)),
		// Moving bytes between parts changes the fingerprint.
		xaalis.Fingerprint("POST", "/v1/plans{", "", []byte(`"a":1}`)),
	} {
		if string(other) == string(base) {
			t.Fatal("two requests share a fingerprint")
		}
	}
	if string(base) != string(xaalis.Fingerprint("POST", "/v1/plans", "", []byte(`{"a":1}`))) {
		t.Fatal("fingerprint is not deterministic")
	}
}

func TestIPAllowed(t *testing.T) {
	ps, err := xaalis.ParsePrefixes([]string{"10.0.0.0/8", "192.0.2.7", "2001:db8::/32"})
	if err != nil {
		t.Fatal(err)
	}
	for ip, want := range map[string]bool{
		"10.1.2.3": true, "192.0.2.7": true, "192.0.2.8": false, "::ffff:10.0.0.1": true,
		"2001:db8::1": true, "127.0.0.1": false,
	} {
		if got := xaalis.IPAllowed(ps, netip.MustParseAddr(ip)); got != want {
			t.Errorf("%s: %v, want %v", ip, got, want)
		}
	}
	if !xaalis.IPAllowed(nil, netip.MustParseAddr("127.0.0.1")) {
		t.Error("an empty list refuses")
	}
	if _, err := xaalis.ParsePrefixes([]string{"10.0.0.0/33"}); err == nil {
		t.Error("bad CIDR accepted")
	}
}

func TestWholeUnits(t *testing.T) {
	for _, c := range []struct {
		lit   string
		minor int64
		code  xaalis.Code
		field bool
	}{
		{"5000", 500000, "", false}, {"1", 100, "", false}, {"0", 0, xaalis.EAmountMustBePositive, false},
		{"-3", 0, xaalis.EAmountMustBePositive, false}, {"-99999999999999999999", 0, xaalis.EAmountMustBePositive, false},
		{`"5000"`, 0, "", true}, {"50.5", 0, "", true}, {"5e3", 0, "", true}, {"null", 0, "", true},
		{"99999999999999999999", 0, "", true}, {"true", 0, "", true},
	} {
		var n xaalis.Number
		if err := n.UnmarshalJSON([]byte(c.lit)); err != nil {
			t.Fatal(err)
		}
		v := xaalis.ValidationErrors{}
		a, err := xaalis.WholeUnits(v, "amount", &n, xaalis.XOF)
		switch {
		case c.code != "":
			if xaalis.ErrorCode(err) != c.code {
				t.Errorf("%s: err %v, want %s", c.lit, err, c.code)
			}
		case c.field:
			if len(v["amount"]) == 0 || err != nil {
				t.Errorf("%s: accepted as %v (err %v)", c.lit, a, err)
			}
		default:
			if err != nil || len(v) != 0 || a.Minor != c.minor {
				t.Errorf("%s: %v, %v, %v", c.lit, a, v, err)
			}
		}
	}
}

func FuzzParseDecimal(f *testing.F) {
	for _, s := range []string{"5000.00", "0.5", "-1", "1.", "abc"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := xaalis.ParseDecimal(s, xaalis.XOF)
		if err != nil {
			return
		}
		b, err := xaalis.ParseDecimal(a.Decimal(), xaalis.XOF)
		if err != nil || b != a {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, a, a.Decimal(), b, err)
		}
	})
}

func FuzzWholeUnits(f *testing.F) {
	for _, s := range []string{"5000", "-1", `"1"`, "1.5", "1e2", "null"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n xaalis.Number
		_ = n.UnmarshalJSON([]byte(s))
		v := xaalis.ValidationErrors{}
		a, err := xaalis.WholeUnits(v, "amount", &n, xaalis.XOF)
		if err == nil && len(v) == 0 && (a.Minor <= 0 || a.Minor%100 != 0) {
			t.Fatalf("%q accepted as %d", s, a.Minor)
		}
	})
}

func FuzzParseKeyPrefix(f *testing.F) {
	f.Add("sk_test_0123456789abcdef0123456789abcdef")
	f.Add("pk_live_")
	f.Fuzz(func(t *testing.T, s string) {
		typ, mode, ok := xaalis.ParseKeyPrefix(s)
		if ok && !strings.HasPrefix(s, xaalis.KeyPrefix(typ, mode)) {
			t.Fatalf("%q parsed as %s %s", s, typ, mode)
		}
	})
}

func FuzzParsePrefixes(f *testing.F) {
	f.Add("10.0.0.0/8")
	f.Add("::ffff:1.2.3.4")
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := xaalis.ParsePrefixes([]string{s})
		if err != nil {
			return
		}
		for _, p := range ps {
			if p != p.Masked() {
				t.Fatalf("%q: unmasked %s", s, p)
			}
		}
	})
}

func TestRandomString(t *testing.T) {
	for _, alphabet := range []string{"ab", "0123456789abcdef", "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "xyz"} {
		s := xaalis.RandomString(64, alphabet)
		if len(s) != 64 {
			t.Fatalf("%q: length %d", alphabet, len(s))
		}
		for _, c := range s {
			if !strings.ContainsRune(alphabet, c) {
				t.Fatalf("%q: %q outside the alphabet", alphabet, c)
			}
		}
	}
}

// TestRouteCredentials: the embedded configuration carries no secret, so
// no live route is usable until credentials are configured; the
// emulator's published credentials are taken on loopback base URLs only.
func TestRouteCredentials(t *testing.T) {
	if strings.Contains(string(xaalis.DefaultConfigJSON()), "emulator-") || strings.Contains(string(xaalis.DefaultConfigJSON()), "secret\": \"") {
		t.Fatal("the embedded configuration carries credentials")
	}
	def, err := xaalis.ParseConfig(xaalis.DefaultConfigJSON())
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range def.Providers {
		if p.LiveReady() || len(p.Unavailable) == 0 {
			t.Fatalf("%s: routes %v usable on the embedded configuration", name, p.Routes)
		}
	}
	cfg := func(base, key, secret string) *xaalis.Config {
		t.Helper()
		b := fmt.Sprintf(`{"providers":{"channel_a":{"enabled":true,"countries":["SN"],"payments":true,"next_action":"redirect",
			"routes":[{"name":"direct","base_url":%q,"api_key":%q,"notify_secret":%q}]}}}`, base, key, secret)
		c, err := xaalis.ParseConfig([]byte(b))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, c := range []struct {
		base, key, secret string
		usable            bool
		reason            string
	}{
		{"https://api.channel-a.example", "live-key", "live-secret", true, ""},
		{"https://api.channel-a.example", "", "live-secret", false, "no api_key"},
		{"https://api.channel-a.example", "live-key", "", false, "no notify_secret"},
		{"https://api.channel-a.example", "", "", false, "no credentials"},
		{"https://api.channel-a.example", "live-key", xaalis.EmulatorNotifySecret("channel_a"), false, "emulator"},
		{"http://10.0.0.5:9090/channel_a", xaalis.EmulatorAPIKey("channel_a"), xaalis.EmulatorNotifySecret("channel_a"), false, "emulator"},
		{"http://127.0.0.1:9090/channel_a", xaalis.EmulatorAPIKey("channel_a"), xaalis.EmulatorNotifySecret("channel_a"), true, ""},
		{"http://localhost:9090/channel_a", xaalis.EmulatorAPIKey("channel_a"), xaalis.EmulatorNotifySecret("channel_a"), true, ""},
		{"http://[::1]:9090/channel_a", xaalis.EmulatorAPIKey("channel_a"), xaalis.EmulatorNotifySecret("channel_a"), true, ""},
		{"http://127.0.0.1.nip.io:9090/channel_a", xaalis.EmulatorAPIKey("channel_a"), xaalis.EmulatorNotifySecret("channel_a"), false, "emulator"},
	} {
		p := cfg(c.base, c.key, c.secret).Providers["channel_a"]
		if p.LiveReady() != c.usable {
			t.Errorf("%+v: usable %v", c, p.LiveReady())
		}
		if !c.usable && (len(p.Unavailable) != 1 || !strings.Contains(p.Unavailable[0].Reason, c.reason)) {
			t.Errorf("%+v: unavailable %+v", c, p.Unavailable)
		}
	}
}

// TestConfigWindowsAndRetries: the dispute window and the subscriptions'
// retries come from the configuration, default when absent or 0, and a
// negative value is refused.
func TestConfigWindowsAndRetries(t *testing.T) {
	def, err := xaalis.ParseConfig(xaalis.DefaultConfigJSON())
	if err != nil {
		t.Fatal(err)
	}
	var zero *xaalis.Config
	for _, c := range []*xaalis.Config{def, {}, zero} {
		if c.DisputeResponseWindow() != 7*24*time.Hour || c.SubscriptionAttempts() != 3 || c.SubscriptionRetryDelay() != 24*time.Hour {
			t.Errorf("defaults: %v %v %v", c.DisputeResponseWindow(), c.SubscriptionAttempts(), c.SubscriptionRetryDelay())
		}
	}
	c, err := xaalis.ParseConfig([]byte(`{"dispute_response_seconds":3600,"subscription_max_attempts":5,"subscription_retry_seconds":600}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.DisputeResponseWindow() != time.Hour || c.SubscriptionAttempts() != 5 || c.SubscriptionRetryDelay() != 10*time.Minute {
		t.Errorf("set: %v %v %v", c.DisputeResponseWindow(), c.SubscriptionAttempts(), c.SubscriptionRetryDelay())
	}
	for _, bad := range []string{`{"dispute_response_seconds":-1}`, `{"subscription_max_attempts":-2}`, `{"subscription_retry_seconds":-3}`,
		`{"payment_expiry_seconds":-5}`, `{"reconcile_after_seconds":-1}`} {
		// The refusal names the setting, and only it.
		name, _, _ := strings.Cut(strings.Trim(bad, `{"`), `"`)
		_, err := xaalis.ParseConfig([]byte(bad))
		if err == nil || !strings.Contains(err.Error(), ": "+name+" is -") || strings.Count(err.Error(), "_") != strings.Count(name, "_") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}
