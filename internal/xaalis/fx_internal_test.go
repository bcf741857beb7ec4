package xaalis

import (
	"math/big"
	"testing"
)

// TestInXOFSameAsConvert: the XOF fast path of inXOF gives what the
// general path, Convert at Rate's 1, gives.
func TestInXOFSameAsConvert(t *testing.T) {
	a := &App{Config: &Config{}}
	rate, ok := a.Config.Rate(XOF, XOF)
	if !ok {
		t.Fatal("no XOF/XOF rate")
	}
	for _, minor := range []int64{1, 99, 100, 101, 150, 199, 250_000_00, 1<<62 - 1} {
		x := Amount{Minor: minor, Currency: XOF}
		got, err := a.inXOF(x)
		if want := Convert(x, XOF, rate).Minor / 100; err != nil || got != want {
			t.Errorf("inXOF(%d) = %d, %v; Convert gives %d", minor, got, err, want)
		}
	}
}

// TestRateString: the rate shown on a record gives back, times the amount,
// the settlement amount to the cent, for amounts up to the limits' scale.
func TestRateString(t *testing.T) {
	a := &App{Config: &Config{FXRates: map[string]string{"EUR/XOF": "655.957"}}}
	for _, c := range []struct {
		from, to Currency
		want     string
	}{
		{EUR, XOF, "655.957"},
		{XOF, EUR, "0.001524490172"},
		{XOF, XOF, "1"},
	} {
		rate, ok := a.Config.Rate(c.from, c.to)
		if !ok {
			t.Fatalf("no rate %s to %s", c.from, c.to)
		}
		shown := RateString(rate)
		if shown != c.want {
			t.Errorf("RateString(%s to %s) = %s, want %s", c.from, c.to, shown, c.want)
		}
		r, ok := new(big.Rat).SetString(shown)
		if !ok {
			t.Fatalf("%q is not a number", shown)
		}
		for _, units := range []int64{1, 1_000, 1_000_000, 50_000_000} {
			x := Units(units, c.from)
			exact := Convert(x, c.to, rate)
			fromShown := Convert(x, c.to, r)
			if exact != fromShown {
				t.Errorf("%d %s: %s at the exact rate, %s at the rate shown (%s)", units, c.from,
					exact.Decimal(), fromShown.Decimal(), shown)
			}
		}
	}
}
