// Package locale is what the pages people read, the hosted payment page
// (internal/checkout) and the operator console (internal/console), share
// about their two languages: which one a request asks for, and how an
// amount is written. Each page keeps its own messages.
package locale

import (
	"strconv"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Lang is a language of the pages: French, the region's, or English.
type Lang string

const (
	FR Lang = "fr"
	EN Lang = "en"
)

// Parse accepts "fr" and "en" (any case, with a region: "fr-SN").
func Parse(s string) (Lang, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	if i := strings.IndexAny(s, "-_"); i >= 0 {
		s = s[:i]
	}
	switch Lang(s) {
	case FR, EN:
		return Lang(s), true
	}
	return "", false
}

// Accept reads an Accept-Language header: the weight of French and of
// English is the weight of their best entry; French wins ties, and is the
// answer when neither is named.
func Accept(header string) Lang {
	if len(header) > 1024 {
		header = header[:1024]
	}
	best := map[Lang]float64{FR: -1, EN: -1}
	for _, part := range strings.Split(header, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		l, ok := Parse(tag)
		if !ok {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			k, v, found := strings.Cut(strings.TrimSpace(p), "=")
			if found && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				} else {
					q = 0
				}
			}
		}
		if q > 0 && q > best[l] {
			best[l] = q
		}
	}
	if best[EN] > best[FR] {
		return EN
	}
	return FR
}

// Other is the language a switch link offers.
func (l Lang) Other() Lang {
	if l == EN {
		return FR
	}
	return EN
}

// Name is the language's name in itself.
func (l Lang) Name() string {
	if l == EN {
		return "English"
	}
	return "Français"
}

// Spaces of amounts: groups of three digits are separated by a narrow
// no-break space (French and SI usage, read the same in English), and the
// currency code is kept on the line of its amount by a no-break space.
const (
	groupSep    = "\u202f"
	currencySep = "\u00a0"
)

// Amount writes an amount for people: "5 000 XOF", "1 234 567 XOF",
// "12,50 EUR" in French and "12.50 EUR" in English. Whole amounts show no
// decimals.
func Amount(a xaalis.Amount, l Lang) string {
	m := a.Minor
	neg := m < 0
	if neg {
		m = -m
	}
	units := strconv.FormatInt(m/100, 10)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range units {
		if i > 0 && (len(units)-i)%3 == 0 {
			b.WriteString(groupSep)
		}
		b.WriteRune(c)
	}
	if frac := m % 100; frac != 0 {
		if l == EN {
			b.WriteByte('.')
		} else {
			b.WriteByte(',')
		}
		if frac < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.FormatInt(frac, 10))
	}
	if a.Currency != "" {
		b.WriteString(currencySep)
		b.WriteString(string(a.Currency))
	}
	return b.String()
}
