package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

const secret = "whsec_0123456789abcdefghijABCDEFGHIJ"

var t0 = time.Unix(1767225600, 0)

// reference computes a v1 signature independently of the package.
func reference(payload []byte, secret string, t int64) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(strconv.FormatInt(t, 10) + "." + string(payload)))
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignFormat(t *testing.T) {
	body := []byte(`{"event":"payment.success","data":{"id":"e1"}}`)
	got := Sign(body, []string{secret, "whsec_old"}, t0)
	want := "t=1767225600,v1=" + reference(body, secret, t0.Unix()) + ",v1=" + reference(body, "whsec_old", t0.Unix())
	if got != want {
		t.Fatalf("Sign = %s\nwant %s", got, want)
	}
	if strings.ToLower(got) != got {
		t.Fatal("signature not lowercase")
	}
}

func TestVerify(t *testing.T) {
	body := []byte(`{"id":"evt_1","object":"event"}`)
	one := Sign(body, []string{secret}, t0)
	two := Sign(body, []string{"whsec_new", secret}, t0)
	mac := reference(body, secret, t0.Unix())
	cases := []struct {
		name    string
		body    []byte
		header  string
		secret  string
		now     time.Time
		tol     time.Duration
		wantErr error
	}{
		{"Valid", body, one, secret, t0, 0, nil},
		{"SecondOfTwoEntries", body, two, secret, t0, 0, nil},
		{"FirstOfTwoEntries", body, two, "whsec_new", t0, 0, nil},
		{"NeitherOfTwo", body, two, "whsec_other", t0, 0, ErrMismatch},
		{"ManyEntriesLastMatches", body, "t=1767225600,v1=" + strings.Repeat("ab", 32) + ",v1=" + strings.Repeat("00", 32) + ",v1=" + mac, secret, t0, 0, nil},
		{"UppercaseHexAccepted", body, "t=1767225600,v1=" + strings.ToUpper(mac), secret, t0, 0, nil},
		{"SpacesAroundEntries", body, " t=1767225600 , v1=" + mac + " ", secret, t0, 0, nil},
		{"UnknownSchemeIgnored", body, "t=1767225600,v0=abc,v1=" + mac, secret, t0, 0, nil},
		{"OnlyUnknownScheme", body, "t=1767225600,v0=" + mac, secret, t0, 0, ErrBadHeader},
		{"ShortV1Ignored", body, "t=1767225600,v1=abcd", secret, t0, 0, ErrBadHeader},
		{"TamperedBody", []byte(`{"id":"evt_2","object":"event"}`), one, secret, t0, 0, ErrMismatch},
		{"BodyWithExtraSpace", []byte(`{"id":"evt_1", "object":"event"}`), one, secret, t0, 0, ErrMismatch},
		{"WrongSecret", body, one, "whsec_wrong", t0, 0, ErrMismatch},
		{"EmptySecret", body, one, "", t0, 0, ErrMismatch},
		{"TamperedTimestamp", body, strings.Replace(one, "t=1767225600", "t=1767225601", 1), secret, t0, 0, ErrMismatch},
		{"Empty", body, "", secret, t0, 0, ErrNoSignature},
		{"Blank", body, "   ", secret, t0, 0, ErrNoSignature},
		{"NoTimestamp", body, "v1=" + mac, secret, t0, 0, ErrBadHeader},
		{"TwoTimestamps", body, "t=1767225600,t=1767225600,v1=" + mac, secret, t0, 0, ErrBadHeader},
		{"NegativeTimestamp", body, "t=-1,v1=" + mac, secret, t0, 0, ErrBadHeader},
		{"PlusTimestamp", body, "t=+1767225600,v1=" + mac, secret, t0, 0, ErrBadHeader},
		{"NonNumericTimestamp", body, "t=soon,v1=" + mac, secret, t0, 0, ErrBadHeader},
		{"NoEquals", body, "t=1767225600,v1", secret, t0, 0, ErrBadHeader},
		{"HugeTimestamp", body, "t=99999999999999999999,v1=" + mac, secret, t0, 0, ErrBadHeader},
		{"ToleranceLateEdge", body, one, secret, t0.Add(300 * time.Second), 0, nil},
		{"ToleranceLateOver", body, one, secret, t0.Add(300*time.Second + time.Nanosecond), 0, ErrTimestamp},
		{"ToleranceEarlyEdge", body, one, secret, t0.Add(-300 * time.Second), 0, nil},
		{"ToleranceEarlyOver", body, one, secret, t0.Add(-301 * time.Second), 0, ErrTimestamp},
		{"CustomToleranceInside", body, one, secret, t0.Add(10 * time.Second), 10 * time.Second, nil},
		{"CustomToleranceOutside", body, one, secret, t0.Add(11 * time.Second), 10 * time.Second, ErrTimestamp},
		{"OldTimestampValidMAC", body, Sign(body, []string{secret}, t0.Add(-time.Hour)), secret, t0, 0, ErrTimestamp},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Verify(c.body, c.header, c.secret, c.now, c.tol)
			if c.wantErr == nil {
				if err != nil {
					t.Fatalf("Verify = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("Verify = %v, want %v", err, c.wantErr)
			}
		})
	}
}

const legacyBody = `{"event":"payment.success","data":{"id":"6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01",` +
	`"transaction_id":"0b9c6c1e-1111-4222-8333-944445555666","object":"transaction","status":"success",` +
	`"merchant_ref":"ORDER-42","merchant_reference":"ORDER-42","metadata":{"order_id":"42"},` +
	`"event_type":"payment.success","sequence":3,"created":1767225600,"livemode":false}}`

const modernBody = `{"id":"6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01","object":"event","type":"payment.success",` +
	`"api_version":"2026-06-01","created":1767225600,"livemode":true,"pending_webhooks":1,` +
	`"request":{"id":null,"idempotency_key":null},"sequence":3,"data":{"id":"6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01",` +
	`"merchant_reference":"ORDER-42","object":{"id":"0b9c6c1e-1111-4222-8333-944445555666","object":"transaction",` +
	`"status":"success","merchant_ref":"ORDER-42","metadata":{"order_id":"42"}}}}`

func TestParse(t *testing.T) {
	t.Run("Legacy", func(t *testing.T) {
		ev, err := Parse([]byte(legacyBody))
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID != "6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01" || ev.Type != "payment.success" || ev.Livemode ||
			ev.Sequence != 3 || !ev.Created.Equal(t0) || ev.MerchantReference != "ORDER-42" {
			t.Fatalf("event = %+v", ev)
		}
		if !strings.Contains(string(ev.Data), `"transaction_id":"0b9c6c1e-1111-4222-8333-944445555666"`) {
			t.Fatalf("data = %s", ev.Data)
		}
		if string(ev.Raw) != legacyBody {
			t.Fatal("raw differs")
		}
	})
	t.Run("20260601", func(t *testing.T) {
		ev, err := Parse([]byte(modernBody))
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID != "6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01" || ev.Type != "payment.success" || !ev.Livemode ||
			ev.Sequence != 3 || !ev.Created.Equal(t0) || ev.MerchantReference != "ORDER-42" {
			t.Fatalf("event = %+v", ev)
		}
		if !strings.HasPrefix(string(ev.Data), `{"id":"0b9c6c1e-1111-4222-8333-944445555666","object":"transaction"`) {
			t.Fatalf("data = %s", ev.Data)
		}
	})
	t.Run("MerchantReferenceFallbacks", func(t *testing.T) {
		for body, want := range map[string]string{
			`{"event":"payment.failed","data":{"id":"e","merchant_ref":"R1"}}`:                                                                        "R1",
			`{"event":"payment.failed","data":{"id":"e","merchant_ref":null,"metadata":{"order_id":"O7"}}}`:                                           "O7",
			`{"event":"payment.failed","data":{"id":"e","merchant_reference":null,"merchant_ref":null}}`:                                              "",
			`{"id":"e","object":"event","type":"payment.failed","data":{"id":"e","merchant_reference":null,"object":{"metadata":{"order_id":"O8"}}}}`: "O8",
		} {
			ev, err := Parse([]byte(body))
			if err != nil {
				t.Fatal(err)
			}
			if ev.MerchantReference != want {
				t.Errorf("%s: merchant reference %q, want %q", body, ev.MerchantReference, want)
			}
		}
	})
	for name, body := range map[string]string{
		"NotJSON":     `event=payment.success`,
		"Array":       `[1,2]`,
		"NoData":      `{"event":"payment.success"}`,
		"NullData":    `{"event":"payment.success","data":null}`,
		"NeitherForm": `{"data":{"id":"x"}}`,
		"NoID":        `{"event":"payment.success","data":{"status":"success"}}`,
		"DataNotObj":  `{"event":"payment.success","data":"x"}`,
	} {
		t.Run("Refuses"+name, func(t *testing.T) {
			if ev, err := Parse([]byte(body)); err == nil {
				t.Fatalf("Parse(%s) = %+v, want an error", body, ev)
			}
		})
	}
}

func TestConstructEvent(t *testing.T) {
	for name, body := range map[string]string{"Legacy": legacyBody, "20260601": modernBody} {
		t.Run(name, func(t *testing.T) {
			header := Sign([]byte(body), []string{secret}, time.Now())
			ev, err := ConstructEvent([]byte(body), header, secret)
			if err != nil {
				t.Fatal(err)
			}
			if ev.ID != "6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01" || ev.Type != "payment.success" {
				t.Fatalf("event = %+v", ev)
			}
			if _, err := ConstructEvent([]byte(body+" "), header, secret); !errors.Is(err, ErrMismatch) {
				t.Fatalf("tampered body: %v", err)
			}
			old := Sign([]byte(body), []string{secret}, time.Now().Add(-10*time.Minute))
			if _, err := ConstructEvent([]byte(body), old, secret); !errors.Is(err, ErrTimestamp) {
				t.Fatalf("old signature: %v", err)
			}
		})
	}
}

// FuzzVerify: the parser never panics, and Verify never accepts a header
// without a v1 entry that is the true MAC of the body.
func FuzzVerify(f *testing.F) {
	body := []byte(modernBody)
	f.Add(body, Sign(body, []string{secret}, t0), secret)
	f.Add(body, Sign(body, []string{"a", secret}, t0), secret)
	f.Add([]byte("x"), "t=1767225600,v1=", "k")
	f.Add([]byte(""), "t=,v1=,,==,t=1", "")
	f.Add([]byte("{}"), "t=1767225600,v1="+strings.Repeat("0", 64), secret)
	f.Fuzz(func(t *testing.T, payload []byte, header, key string) {
		err := Verify(payload, header, key, t0, DefaultTolerance)
		if err != nil {
			if !errors.Is(err, ErrNoSignature) && !errors.Is(err, ErrBadHeader) && !errors.Is(err, ErrTimestamp) &&
				!errors.Is(err, ErrMismatch) {
				t.Fatalf("unexpected error kind %v", err)
			}
		} else {
			// Accepted: find t and a v1 equal to the reference MAC.
			var ts int64 = -1
			var entries []string
			for _, part := range strings.Split(header, ",") {
				k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
				switch strings.TrimSpace(k) {
				case "t":
					ts, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				case "v1":
					entries = append(entries, strings.ToLower(strings.TrimSpace(v)))
				}
			}
			want := reference(payload, key, ts)
			found := false
			for _, e := range entries {
				found = found || e == want
			}
			if !found || key == "" {
				t.Fatalf("accepted header %q for a body it does not sign", header)
			}
		}
		// A correct signature of this body verifies, and not for a
		// different body.
		if key != "" {
			h := Sign(payload, []string{key}, t0)
			if err := Verify(payload, h, key, t0, DefaultTolerance); err != nil {
				t.Fatalf("own signature refused: %v", err)
			}
			if err := Verify(append(payload[:len(payload):len(payload)], 'x'), h, key, t0, DefaultTolerance); !errors.Is(err, ErrMismatch) {
				t.Fatalf("signature accepted for another body: %v", err)
			}
		}
	})
}
