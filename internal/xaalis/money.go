package xaalis

import (
	"fmt"
	"strconv"
)

// Currency is an ISO 4217 code.
type Currency string

// Currencies the service knows, with their minor-unit exponent. XOF has
// no minor unit in ISO 4217; the service still counts it in hundredths so
// that "5000.00" is exact and fees may carry centimes.
const (
	XOF Currency = "XOF"
	EUR Currency = "EUR"
	USD Currency = "USD"
)

// Currencies is the set the API accepts.
var Currencies = []Currency{XOF, EUR, USD}

// Valid reports whether c is accepted.
func (c Currency) Valid() bool {
	for _, k := range Currencies {
		if k == c {
			return true
		}
	}
	return false
}

// Country is an ISO 3166-1 alpha-2 code of one of the UEMOA countries.
type Country string

// The eight UEMOA countries.
var Countries = []Country{"SN", "CI", "ML", "BF", "TG", "BJ", "NE", "GW"}

// Valid reports whether c is a UEMOA country.
func (c Country) Valid() bool {
	for _, k := range Countries {
		if k == c {
			return true
		}
	}
	return false
}

// Amount is money: an integer count of hundredths of the currency's
// unit, with its currency. No float ever holds an amount.
type Amount struct {
	Minor    int64
	Currency Currency
}

// Units returns an amount of whole units (request amounts are whole units).
func Units(units int64, c Currency) Amount { return Amount{Minor: units * 100, Currency: c} }

// Decimal renders the amount with two decimals, as records carry it.
func (a Amount) Decimal() string {
	neg := a.Minor < 0
	m := a.Minor
	if neg {
		m = -m
	}
	s := fmt.Sprintf("%d.%02d", m/100, m%100)
	if neg {
		s = "-" + s
	}
	return s
}

// ParseDecimal parses "5000", "5000.5" or "5000.00" into an Amount.
func ParseDecimal(s string, c Currency) (Amount, error) {
	if s == "" {
		return Amount{}, fmt.Errorf("empty amount")
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	whole, frac := s, ""
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			whole, frac = s[:i], s[i+1:]
			break
		}
	}
	if whole == "" || len(frac) > 2 {
		return Amount{}, fmt.Errorf("invalid amount %q", s)
	}
	for len(frac) < 2 {
		frac += "0"
	}
	w, err := strconv.ParseUint(whole, 10, 62)
	if err != nil {
		return Amount{}, fmt.Errorf("invalid amount %q", s)
	}
	f, err := strconv.ParseUint(frac, 10, 8)
	if err != nil {
		return Amount{}, fmt.Errorf("invalid amount %q", s)
	}
	m := int64(w)*100 + int64(f)
	if m/100 != int64(w) {
		return Amount{}, fmt.Errorf("amount %q overflows", s)
	}
	if neg {
		m = -m
	}
	return Amount{Minor: m, Currency: c}, nil
}
