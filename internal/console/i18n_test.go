package console

import (
	"regexp"
	"strings"
	"testing"
)

// TestMessages: both languages have the same keys, and every key the
// templates name exists.
func TestMessages(t *testing.T) {
	for k := range messages[langFR] {
		if _, ok := messages[langEN][k]; !ok {
			t.Errorf("%q has no English", k)
		}
	}
	for k := range messages[langEN] {
		if _, ok := messages[langFR][k]; !ok {
			t.Errorf("%q has no French", k)
		}
	}
	used := regexp.MustCompile(`(?:L|l)\.(?:T|F) "([a-z_]+)"`)
	files, err := templateFS.ReadDir("templates")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, _ := templateFS.ReadFile("templates/" + f.Name())
		for _, m := range used.FindAllStringSubmatch(string(b), -1) {
			if _, ok := messages[langFR][m[1]]; !ok {
				t.Errorf("%s: key %q is missing", f.Name(), m[1])
			}
		}
	}
	for k := range okKeys {
		if strings.HasPrefix(langEN.T("ok_"+k), "!missing") || strings.HasPrefix(langFR.T("ok_"+k), "!missing") {
			t.Errorf("ok key %q has no message", k)
		}
	}
}

// TestPickLang: the switch's cookie first, then Accept-Language, French
// by default.
func TestPickLang(t *testing.T) {
	for _, c := range []struct{ header, want string }{
		{"", "fr"}, {"en-US,en;q=0.9", "en"}, {"fr-SN,fr;q=0.9,en;q=0.8", "fr"}, {"en;q=0.5,fr;q=0.5", "fr"},
		{"de,en;q=0.3", "en"}, {"en;q=bogus", "fr"},
	} {
		if got := acceptOnly(c.header); string(got) != c.want {
			t.Errorf("Accept-Language %q: %s, want %s", c.header, got, c.want)
		}
	}
}
