package xaalis

import (
	"errors"
	"fmt"
	"testing"
)

// TestPhoneCache: an accepted number is remembered under its country, so
// the same digits in another country are judged again, and the cache
// never holds more than its bound.
func TestPhoneCache(t *testing.T) {
	const raw = "+221 77 123 00 01"
	got, err := ParsePhone(raw, "SN")
	if err != nil || got != "+221771230001" {
		t.Fatalf("SN: %q, %v", got, err)
	}
	if v, ok := accepted.get("SN+221771230001"); !ok || v != got {
		t.Fatalf("not remembered: %q, %v", v, ok)
	}
	var e *Error
	if got, err := ParsePhone(raw, "CI"); !errors.As(err, &e) || e.Context["reason"] != PhoneReasonWrongCountry {
		t.Fatalf("the same number in CI: %q, %v", got, err)
	}
	if _, ok := accepted.get("CI+221771230001"); ok {
		t.Fatal("a refused number was remembered")
	}

	c := phoneCache{max: 4}
	for i := range 10 {
		c.put(fmt.Sprint("SN", i), fmt.Sprint("+", i))
		if len(c.m) > c.max {
			t.Fatalf("%d entries, bound %d", len(c.m), c.max)
		}
		if v, ok := c.get(fmt.Sprint("SN", i)); !ok || v != fmt.Sprint("+", i) {
			t.Fatalf("entry %d: %q, %v", i, v, ok)
		}
	}
}
