package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/storetest"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestReadsPlanOnce: a list's first page, or a due query, runs on its
// cached generic plan once PostgreSQL has tried five custom plans, not
// planned again at every call. A LIMIT or OFFSET parameter kept the
// statement on custom plans for ever (a generic plan assumes it reads a
// tenth of the table): GET /v1/payments was planned at each request.
func TestReadsPlanOnce(t *testing.T) {
	ctx := context.Background()
	// Two connections, one of them the wake-up listener: every read runs
	// on the other, so its counts are those of one connection.
	s := openURL(t, pgtest.URL(t)+"&pool_max_conns=2")
	page := func(int) xaalis.PageRequest { return xaalis.PageRequest{Page: 1, PerPage: 20} }
	limit := func(int) int { return 50 }
	const calls = 12
	reads := storetest.Reads(s, page, limit)
	for _, c := range reads {
		for i := range calls {
			if err := c.Run(ctx, i); err != nil {
				t.Fatalf("%s: %v", c.Name, err)
			}
		}
	}
	counts, err := s.PlanCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ran int
	for _, p := range counts {
		if p.Generic+p.Custom < calls {
			continue // not one of the reads
		}
		ran++
		// The operator's payout request queue, a page a person opens:
		// a custom plan reads the length of its statuses array, so a
		// generic plan, which cannot, always looks dearer.
		if strings.Contains(p.Statement, "status = ANY($1)") {
			continue
		}
		if p.Custom > 5 {
			t.Errorf("planned again at each call (%d custom plans, %d generic): %s", p.Custom, p.Generic, oneLine(p.Statement))
		}
	}
	if ran < len(reads) {
		t.Errorf("%d statements ran %d times or more, want at least %d (one for each read)", ran, calls, len(reads))
	}
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
