package xaalis

import (
	"testing"
	"time"
)

// TestPeriodEnd: periods count from the subscription's start; months and
// years keep its day, clamped to a shorter month's last. time.AddDate
// rolled 31 October + 1 month over to 1 December: no period ended in
// November, and the billing day moved for good.
func TestPeriodEnd(t *testing.T) {
	at := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 10, 0, 0, 0, time.UTC) }
	month := &Plan{Interval: IntervalMonth, IntervalCount: 1}
	for _, c := range []struct {
		anchor time.Time
		k      int
		p      *Plan
		want   time.Time
	}{
		{at(2026, 10, 31), 1, month, at(2026, 11, 30)},
		{at(2026, 10, 31), 2, month, at(2026, 12, 31)},
		{at(2026, 10, 31), 4, month, at(2027, 2, 28)},
		{at(2027, 12, 31), 2, month, at(2028, 2, 29)},
		{at(2026, 1, 15), 13, month, at(2027, 2, 15)},
		{at(2028, 2, 29), 1, &Plan{Interval: IntervalYear, IntervalCount: 1}, at(2029, 2, 28)},
		{at(2028, 2, 29), 4, &Plan{Interval: IntervalYear, IntervalCount: 1}, at(2032, 2, 29)},
		{at(2026, 8, 31), 1, &Plan{Interval: IntervalMonth, IntervalCount: 3}, at(2026, 11, 30)},
		{at(2026, 12, 30), 3, &Plan{Interval: IntervalDay, IntervalCount: 1}, at(2027, 1, 2)},
		{at(2026, 12, 30), 2, &Plan{Interval: IntervalWeek, IntervalCount: 2}, at(2027, 1, 27)},
	} {
		if got := periodEnd(c.anchor, c.k, c.p); !got.Equal(c.want) {
			t.Errorf("periodEnd(%v, %d, %s×%d) = %v, want %v", c.anchor, c.k, c.p.Interval, c.p.IntervalCount, got, c.want)
		}
	}
	// The renewals: from each end, the next, over ten years of months.
	anchor := at(2026, 1, 31)
	end := periodEnd(anchor, 1, month)
	for k := 2; k <= 120; k++ {
		next := nextPeriodEnd(anchor, end, month)
		if want := periodEnd(anchor, k, month); !next.Equal(want) {
			t.Fatalf("after %v: %v, want %v", end, next, want)
		}
		if next.Day() != 31 && next.AddDate(0, 0, 1).Day() != 1 {
			t.Fatalf("%v is neither the 31st nor a month's last day", next)
		}
		end = next
	}
	// An end that drifted (an earlier release's renewal, 1 December after
	// 31 October) is followed by the anchor's next.
	if got := nextPeriodEnd(at(2026, 10, 31), at(2026, 12, 1), month); !got.Equal(at(2026, 12, 31)) {
		t.Fatalf("after a drifted end: %v", got)
	}
	day := &Plan{Interval: IntervalDay, IntervalCount: 1}
	if got := nextPeriodEnd(at(2026, 1, 1), at(2026, 3, 1), day); !got.Equal(at(2026, 3, 2)) {
		t.Fatalf("daily: %v", got)
	}
}
