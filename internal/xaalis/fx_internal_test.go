package xaalis

import "testing"

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
