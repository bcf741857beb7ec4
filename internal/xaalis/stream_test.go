package xaalis_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func TestParseEventTypeFilter(t *testing.T) {
	for _, c := range []struct {
		in      string
		ok      bool
		match   []string
		nomatch []string
	}{
		{"", true, []string{"payment.success", "payout.failed"}, nil},
		{"*", true, []string{"dispute.won"}, nil},
		{"payment.success", true, []string{"payment.success"}, []string{"payment.failed", "payout.success"}},
		{"payment.success, payout.*", true, []string{"payment.success", "payout.failed", "payout.cancelled"},
			[]string{"payment.failed", "payout_request.approved"}},
		{"payout*", true, []string{"payout.failed", "payout_request.approved"}, []string{"payment.success"}},
		{"payment.nope", false, nil, nil},
		{"pay*ment", false, nil, nil},
		{"nothing.*", false, nil, nil},
		{"**", false, nil, nil},
		// An unknown type beside * is told, on either side of it.
		{"bogus,*", false, nil, nil},
		{"*,bogus", false, nil, nil},
		{"payment.success,*", true, []string{"payout.failed", "payment.success"}, nil},
	} {
		f, err := xaalis.ParseEventTypeFilter("types", c.in)
		if (err == nil) != c.ok {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if err != nil {
			if xaalis.ErrorCode(err) != xaalis.EValidation {
				t.Errorf("%q: %v, want validation_error", c.in, err)
			}
			continue
		}
		for _, m := range c.match {
			if !f.Match(m) {
				t.Errorf("%q does not match %s", c.in, m)
			}
		}
		for _, m := range c.nomatch {
			if f.Match(m) {
				t.Errorf("%q matches %s", c.in, m)
			}
		}
	}
}

// FuzzParseEventTypeFilter: any ?types= value parses or is refused with
// validation_error; an accepted filter matches only known types, and
// each of its patterns at least one.
func FuzzParseEventTypeFilter(f *testing.F) {
	for _, s := range []string{"", "*", "payment.success,payout.*", "payout*", "a,,b", "*.*", "payment.success,*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := xaalis.ParseEventTypeFilter("types", s)
		if err != nil {
			if xaalis.ErrorCode(err) != xaalis.EValidation {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		for _, p := range flt {
			if !slices.ContainsFunc(xaalis.EventTypes, func(typ string) bool { return xaalis.EventTypeFilter{p}.Match(typ) }) {
				t.Fatalf("%q: pattern %q matches no type", s, p)
			}
			if strings.Contains(strings.TrimSuffix(p, "*"), "*") {
				t.Fatalf("%q: pattern %q", s, p)
			}
		}
	})
}
