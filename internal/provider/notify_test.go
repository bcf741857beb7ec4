package provider_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

const secretA = "emulator-channel_a-notify"

func notificationBody(country, status string) []byte {
	b, _ := json.Marshal(provider.Event{
		EventID:    "evt_1",
		Type:       provider.EventCollectionUpdated,
		Country:    country,
		Collection: provider.EventCollection{ID: "col_a_1", Status: status, Reason: "r"},
	})
	return b
}

func signedRequest(header string, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/providers/channel_a/notifications", bytes.NewReader(body))
	if header != "" {
		r.Header.Set(provider.SignatureHeader, header)
	}
	return r
}

func TestVerifyNotification(t *testing.T) {
	clk := newClock()
	cfg := defaults(t)
	// channel_a's aggregator signs with a secret of its own.
	a := cfg.Providers["channel_a"]
	a.Routes[1].NotifySecret = "aggregator-secret"
	a.DisabledCountries = []xaalis.Country{"NE"}
	cfg.Providers["channel_a"] = a
	c := cfg.Providers["channel_c"]
	c.Enabled = false
	cfg.Providers["channel_c"] = c
	gw := provider.New(cfg, provider.Options{Now: clk.Now})
	now := clk.Now()
	body := notificationBody("SN", "success")

	verify := func(prov, header string, body []byte) (xaalis.Notification, error) {
		return gw.VerifyNotification(context.Background(), prov, signedRequest(header, body), body)
	}

	t.Run("OKSigned", func(t *testing.T) {
		n, err := verify("channel_a", provider.Sign(secretA, now, body), body)
		if err != nil {
			t.Fatal(err)
		}
		want := xaalis.Notification{EventID: "evt_1", Provider: "channel_a", Country: "SN", ProviderRef: "col_a_1", State: xaalis.ProviderSuccess, Reason: "r"}
		if n != want {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("OKAnyRouteSecret", func(t *testing.T) {
		if _, err := verify("channel_a", provider.Sign("aggregator-secret", now, body), body); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OKSeveralSignatures", func(t *testing.T) {
		good := provider.Sign(secretA, now, body)
		h := strings.Replace(good, ",", ",v1="+strings.Repeat("0", 64)+",", 1)
		if _, err := verify("channel_a", h, body); err != nil {
			t.Fatalf("%s: %v", h, err)
		}
	})
	t.Run("OKWithinTolerance", func(t *testing.T) {
		for _, d := range []time.Duration{-299 * time.Second, 299 * time.Second} {
			if _, err := verify("channel_a", provider.Sign(secretA, now.Add(d), body), body); err != nil {
				t.Fatalf("%v: %v", d, err)
			}
		}
	})
	t.Run("OKCountryFromQuery", func(t *testing.T) {
		b := notificationBody("", "failed")
		r := httptest.NewRequest(http.MethodPost, "/v1/providers/channel_a/notifications?country=CI", bytes.NewReader(b))
		r.Header.Set(provider.SignatureHeader, provider.Sign(secretA, now, b))
		n, err := gw.VerifyNotification(context.Background(), "channel_a", r, b)
		if err != nil || n.Country != "CI" || n.State != xaalis.ProviderFailed {
			t.Fatalf("%+v %v", n, err)
		}
	})
	t.Run("ErrDuplicateKey", func(t *testing.T) {
		// Signed, but ambiguous: which status did the provider mean?
		b := []byte(`{"event_id":"evt_2","type":"collection.updated","country":"SN","collection":{"id":"col_a_1","status":"failed","status":"success"}}`)
		_, err := verify("channel_a", provider.Sign(secretA, now, b), b)
		if e := wantCode(t, err, xaalis.EInvalidRequest); !strings.Contains(e.Message, `"collection.status"`) {
			t.Fatalf("message: %s", e.Message)
		}
	})
	t.Run("ErrTamperedBody", func(t *testing.T) {
		h := provider.Sign(secretA, now, body)
		tampered := bytes.Replace(body, []byte("success"), []byte("failed"), 1)
		_, err := verify("channel_a", h, tampered)
		wantCode(t, err, xaalis.EInvalidSignature)
	})
	t.Run("ErrWrongSecret", func(t *testing.T) {
		_, err := verify("channel_a", provider.Sign("emulator-channel_b-notify", now, body), body)
		wantCode(t, err, xaalis.EInvalidSignature)
	})
	t.Run("ErrStaleTimestamp", func(t *testing.T) {
		for _, d := range []time.Duration{-301 * time.Second, 301 * time.Second, -24 * time.Hour} {
			_, err := verify("channel_a", provider.Sign(secretA, now.Add(d), body), body)
			if e := wantCode(t, err, xaalis.EInvalidSignature); e.Status() != 401 {
				t.Fatal(e.Status())
			}
		}
	})
	t.Run("ErrMissingOrMalformed", func(t *testing.T) {
		good := provider.Sign(secretA, now, body)
		ts, _, _ := strings.Cut(good, ",")
		for _, h := range []string{"", "garbage", ts, ts + ",v1=zz", "v1=" + strings.Repeat("a", 64), ts + ",v1=" + strings.Repeat("a", 63),
			ts + "," + ts + ",v1=" + strings.Repeat("a", 64), "t=-5,v1=" + strings.Repeat("a", 64)} {
			_, err := verify("channel_a", h, body)
			wantCode(t, err, xaalis.EInvalidSignature)
		}
		_, err := gw.VerifyNotification(context.Background(), "channel_a", nil, body)
		wantCode(t, err, xaalis.EInvalidSignature)
	})
	t.Run("ErrProviderUnavailable", func(t *testing.T) {
		// Disabled provider, unknown provider: 404 whatever the signature.
		for _, p := range []string{"channel_c", "channel_z", ""} {
			_, err := verify(p, provider.Sign("emulator-channel_c-notify", now, body), body)
			if e := wantCode(t, err, xaalis.EProviderUnavailableWebhook); e.Status() != 404 {
				t.Fatal(e.Status())
			}
		}
		// Disabled for the country, or not serving it.
		for _, country := range []string{"NE", "FR"} {
			b := notificationBody(country, "success")
			_, err := verify("channel_a", provider.Sign(secretA, now, b), b)
			wantCode(t, err, xaalis.EProviderUnavailableWebhook)
		}
	})
	t.Run("ErrBadBody", func(t *testing.T) {
		for _, b := range []string{
			`not json`,
			`{"event_id":"e","type":"collection.updated","collection":{"id":"c","status":"weird"}}`,
			`{"event_id":"","type":"collection.updated","collection":{"id":"c","status":"success"}}`,
			`{"event_id":"e","type":"other","collection":{"id":"c","status":"success"}}`,
			`{"event_id":"e","type":"dispute.opened","collection":{"id":"c","status":"success"}}`,
			`{"event_id":"e","type":"collection.updated","collection":{"id":"c","status":"success"}} {}`,
		} {
			_, err := verify("channel_a", provider.Sign(secretA, now, []byte(b)), []byte(b))
			wantCode(t, err, xaalis.EInvalidRequest)
		}
	})
	t.Run("OKPayout", func(t *testing.T) {
		b, _ := json.Marshal(provider.Event{EventID: "evt_p1", Type: provider.EventPayoutUpdated, Country: "SN",
			Payout: &provider.EventPayout{ID: "po_a_1", Reference: "TXN-1", Status: "failed", Reason: provider.ReasonRecipientRejected}})
		if strings.Contains(string(b), `"collection"`) {
			t.Fatalf("a payout event carries a collection: %s", b)
		}
		n, err := verify("channel_a", provider.Sign(secretA, now, b), b)
		want := xaalis.Notification{EventID: "evt_p1", Provider: "channel_a", Country: "SN", ProviderRef: "po_a_1",
			State: xaalis.ProviderFailed, Reason: provider.ReasonRecipientRejected}
		if err != nil || n != want {
			t.Fatalf("%+v %v", n, err)
		}
		// Signatures and countries are checked as for collections.
		_, err = verify("channel_a", provider.Sign("emulator-channel_b-notify", now, b), b)
		wantCode(t, err, xaalis.EInvalidSignature)
		ne := []byte(strings.Replace(string(b), `"SN"`, `"NE"`, 1))
		_, err = verify("channel_a", provider.Sign(secretA, now, ne), ne)
		wantCode(t, err, xaalis.EProviderUnavailableWebhook)
	})
	t.Run("ErrBadPayoutBody", func(t *testing.T) {
		for _, b := range []string{
			`{"event_id":"e","type":"payout.updated"}`,
			`{"event_id":"e","type":"payout.updated","collection":{"id":"c","status":"success"}}`,
			`{"event_id":"e","type":"payout.updated","payout":{"id":"","status":"success"}}`,
			`{"event_id":"e","type":"payout.updated","payout":{"id":"p","status":"done"}}`,
			`{"event_id":"","type":"payout.updated","payout":{"id":"p","status":"success"}}`,
			`{"event_id":"e","type":"collection.updated","payout":{"id":"p","status":"success"}}`,
		} {
			_, err := verify("channel_a", provider.Sign(secretA, now, []byte(b)), []byte(b))
			wantCode(t, err, xaalis.EInvalidRequest)
		}
	})
	t.Run("OKDispute", func(t *testing.T) {
		b := []byte(`{"event_id":"e2","type":"dispute.opened","country":"SN","collection":{"id":"c","status":"success"},"dispute":{"amount":1500,"reason":"fraud"}}`)
		n, err := verify("channel_a", provider.Sign(secretA, now, b), b)
		if err != nil || n.Dispute == nil || n.Dispute.Amount != xaalis.Units(15, xaalis.XOF) || n.Dispute.Reason != "fraud" {
			t.Fatalf("%+v %v", n, err)
		}
	})
}

// FuzzVerifyNotification: whatever the body and header, verification
// never panics, and it accepts only a body signed with a provider secret
// at a timestamp within tolerance.
func FuzzVerifyNotification(f *testing.F) {
	clk := newClock()
	now := clk.Now()
	good := notificationBody("SN", "success")
	f.Add(good, provider.Sign(secretA, now, good), false)
	f.Add(good, provider.Sign(secretA, now, good)+",v1=00", false)
	f.Add([]byte(`{"event_id":"e","type":"dispute.opened","collection":{"id":"c","status":"pending"},"dispute":{"amount":-1}}`), "t=1,v1=ab", true)
	f.Add([]byte(`{}`), "", true)
	f.Add([]byte(`{"event_id":"e","type":"payout.updated","payout":{"id":"po_a_1","status":"success"}}`), "", true)
	f.Fuzz(func(t *testing.T, body []byte, header string, resign bool) {
		cfg, err := xaalis.LoadConfig("")
		if err != nil {
			t.Fatal(err)
		}
		gw := provider.New(cfg, provider.Options{Now: clk.Now})
		if resign {
			// A correctly signed arbitrary body exercises the parser.
			header = provider.Sign(secretA, now, body)
		}
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		r.Header.Set(provider.SignatureHeader, header)
		n, err := gw.VerifyNotification(context.Background(), "channel_a", r, body)
		if err != nil {
			var xe *xaalis.Error
			if !errors.As(err, &xe) {
				t.Fatalf("not a domain error: %v", err)
			}
			switch xe.Code {
			case xaalis.EInvalidSignature, xaalis.EInvalidRequest, xaalis.EProviderUnavailableWebhook:
			default:
				t.Fatalf("unexpected code %s", xe.Code)
			}
			return
		}
		if !strings.Contains(header, "v1=") {
			t.Fatalf("accepted without a signature: %q", header)
		}
		if n.EventID == "" || n.ProviderRef == "" || n.Provider != "channel_a" {
			t.Fatalf("accepted an incomplete notification: %+v", n)
		}
		switch n.State {
		case xaalis.ProviderPending, xaalis.ProviderSuccess, xaalis.ProviderFailed, xaalis.ProviderCancelled:
		default:
			t.Fatalf("state %q", n.State)
		}
		// Accepted under a fuzzed header: it must still carry our signature
		// of exactly this body at a timestamp within tolerance.
		if !resign && !withinTolerance(header, body, now) {
			t.Fatalf("accepted a forged signature %q", header)
		}
	})
}

// withinTolerance reports whether header carries a valid signature of
// body by secretA at some timestamp within 300 s of now.
func withinTolerance(header string, body []byte, now time.Time) bool {
	for part := range strings.SplitSeq(header, ",") {
		if ts, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
			var sec int64
			for _, c := range ts {
				if c < '0' || c > '9' {
					return false
				}
				sec = sec*10 + int64(c-'0')
			}
			t := time.Unix(sec, 0)
			if d := t.Sub(now); d > 300*time.Second || d < -300*time.Second {
				return false
			}
			sig := provider.Sign(secretA, t, body)
			_, v1, _ := strings.Cut(sig, ",")
			return strings.Contains(strings.ToLower(header), v1)
		}
	}
	return false
}

func TestRunEmulator(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- provider.RunEmulator(ctx, "127.0.0.1:0", pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "Provider emulator listening on ")
	if !ok || !strings.HasPrefix(addr, "http://127.0.0.1:") {
		t.Fatalf("%q", line)
	}
	go io.Copy(io.Discard, pr)
	resp, err := http.Get(addr + "/_control")
	if err != nil {
		t.Fatal(err)
	}
	var st provider.EmulatorState
	err = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if err != nil || len(st.Providers["channel_a"].Routes) != 2 {
		t.Fatalf("%+v %v", st, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("RunEmulator did not stop")
	}
}
