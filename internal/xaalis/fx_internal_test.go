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

// TestGridFeeOtherCurrency: a fee grid's fixed part and minimum are whole
// units of XOF, converted for an amount in EUR (a 10 XOF minimum is 0.02
// EUR, not 10 EUR); in XOF the grid applies as written.
func TestGridFeeOtherCurrency(t *testing.T) {
	c := &Config{FXRates: map[string]string{"EUR/XOF": "655.957"}}
	g := FeeGrid{PercentBP: 150, Min: 10}
	for _, tc := range []struct {
		amount Amount
		want   int64
	}{
		{Units(20, EUR), 30},                  // 1.5 % of 20.00 EUR: 0.30 EUR
		{Amount{Minor: 50, Currency: EUR}, 2}, // 1.5 % of 0.50 EUR is 0.01; the minimum, 10 XOF, is 0.02 EUR
		{Units(5000, XOF), 7500},              // 75 XOF
		{Units(100, XOF), 1000},               // the minimum, 10 XOF
	} {
		if got := c.GridFee(g, tc.amount); got.Minor != tc.want || got.Currency != tc.amount.Currency {
			t.Errorf("fee of %s %s = %s %s, want %d minor units", tc.amount.Decimal(), tc.amount.Currency,
				got.Decimal(), got.Currency, tc.want)
		}
	}
	// The withdrawal fee's floor of 500 XOF is 0.76 EUR.
	w := FeeGrid{PercentBP: 50, Min: 500}
	if got := c.GridFee(w, Units(50, EUR)); got.Minor != 76 {
		t.Errorf("withdrawal fee of 50 EUR = %s, want 0.76", got.Decimal())
	}
}

// TestInXOFRoundsUp: a limit compares an amount's whole worth in XOF, so
// 1 EUR (655.957 XOF) counts as 656, above a 655 XOF maximum.
func TestInXOFRoundsUp(t *testing.T) {
	a := &App{Config: &Config{FXRates: map[string]string{"EUR/XOF": "655.957"}}}
	for _, tc := range []struct {
		amount Amount
		want   int64
	}{
		{Units(1, EUR), 656},
		{Units(1000, EUR), 655957},
		{Units(655, XOF), 655},
	} {
		if got, err := a.inXOF(tc.amount); err != nil || got != tc.want {
			t.Errorf("inXOF(%s %s) = %d, %v; want %d", tc.amount.Decimal(), tc.amount.Currency, got, err, tc.want)
		}
	}
}
