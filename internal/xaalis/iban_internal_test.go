package xaalis

import (
	"strings"
	"testing"
)

func TestValidIBAN(t *testing.T) {
	for _, c := range []struct {
		iban string
		want bool
	}{
		{"SN08SN0100152000048500003035", true},
		{"CI93CI0080111301134291200589", true},
		{"GW04GW1430010181800637601", true},
		{"FR7630006000011234567890189", true},
		{"DE89370400440532013000", true},
		{"FR7630006000011234567890188", false},  // one digit changed
		{"SN08SN0100152000048500003053", false}, // two digits swapped
		{"ZZ12ABCDEFGHIJKL", false},
		{"SN00AAAAAAAAAAAAAAAAAAAAAAAA", false},
		{"SN08SN010015200004850000303", false}, // one short for Senegal
		{"NOTANIBAN", false},
		{"", false},
	} {
		if got := validIBAN(c.iban); got != c.want {
			t.Errorf("validIBAN(%q) = %v, want %v", c.iban, got, c.want)
		}
	}
}

func FuzzValidIBAN(f *testing.F) {
	for _, s := range []string{"SN08SN0100152000048500003035", "FR7630006000011234567890189", "XX00", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validIBAN(s) && (len(s) < 14 || strings.ToUpper(s) != s || strings.ContainsAny(s, " -")) {
			t.Fatalf("%q taken for an IBAN", s)
		}
	})
}
