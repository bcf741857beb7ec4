package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// compiles counts the SELECTs SQLite compiles on the connections of each
// database whose path holds a token (countCompiles): its authorizer is
// called once for each SELECT a statement holds, at every preparation,
// the automatic re-preparations included.
var compiles struct {
	mu sync.Mutex
	by map[string]*atomic.Int64
}

// The hook is registered before any test runs: the driver reads its hooks
// without a lock whenever it opens a connection.
func init() {
	compiles.by = map[string]*atomic.Int64{}
	sqlite.RegisterConnectionHook(func(c sqlite.ExecQuerierContext, dsn string) error {
		compiles.mu.Lock()
		var n *atomic.Int64
		for token, m := range compiles.by {
			if strings.Contains(dsn, token) {
				n = m
			}
		}
		compiles.mu.Unlock()
		if n == nil {
			return nil
		}
		return c.(sqlite.AuthorizerRegisterer).RegisterAuthorizer(func(a sqlite.AuthorizerActionCode, _, _, _, _ string) sqlite.AuthorizerReturnCode {
			if a == sqlite.AuthSelect {
				n.Add(1)
			}
			return sqlite.AuthorizerOK
		})
	})
}

// countCompiles returns a directory for a database whose connections count
// the SELECTs compiled on them, and the count so far.
func countCompiles(t *testing.T) (dir string, count func() int64) {
	t.Helper()
	dir, err := os.MkdirTemp(t.TempDir(), "compiles-")
	if err != nil {
		t.Fatal(err)
	}
	n := new(atomic.Int64)
	compiles.mu.Lock()
	compiles.by[filepath.Base(dir)] = n
	compiles.mu.Unlock()
	return dir, n.Load
}

// TestReadsPrepareOnce: a list's statement, prepared once on a
// connection, runs again for another page, filter value or limit without
// being compiled again. SQLite re-prepares a statement at every new
// binding of a parameter the planner looked at: a bound LIMIT (it plans
// with the value), and an equality on a column that a partial index's
// WHERE compares with a literal (type = 'payment', status = 'pending':
// the planner checks whether the bound value is that literal). A list of
// payments was parsed and planned again at each request: 13-18 % of the
// list scenario's CPU, 330 against 270 µs a request.
func TestReadsPrepareOnce(t *testing.T) {
	ctx := context.Background()
	dir, count := countCompiles(t)
	s, err := Open(ctx, filepath.Join(dir, "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One reader: every call finds the statements its previous call
	// prepared.
	s.readDB.SetMaxOpenConns(1)
	s.readDB.SetMaxIdleConns(1)

	now := time.Now()
	m, mode := "mer_prepare", xaalis.ModeTest
	page := func(i int) xaalis.PageRequest { return xaalis.PageRequest{Page: 1 + i, PerPage: 10 + i} }
	types := []xaalis.TxType{xaalis.TypePayment, xaalis.TypePayout, xaalis.TypeRefund}
	statuses := []xaalis.Status{xaalis.StatusPending, xaalis.StatusSuccess, xaalis.StatusFailed}
	for _, c := range []struct {
		name string
		read func(i int) error
	}{
		{"transactions", func(i int) error {
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode}, page(i))
			return err
		}},
		{"transactions by type", func(i int) error {
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode, Type: types[i%3]}, page(i))
			return err
		}},
		{"transactions by type and status", func(i int) error {
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode, Type: types[i%3], Status: statuses[i%3]}, page(i))
			return err
		}},
		{"transactions by status, provider and dates", func(i int) error {
			from, to := now.Add(-time.Hour), now
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode, Status: statuses[i%3], Provider: "channel_a", From: &from, To: &to}, page(i))
			return err
		}},
		{"due: expired", func(i int) error {
			_, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: 10 + i, Expired: true})
			return err
		}},
		{"due: reconcile", func(i int) error {
			_, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: 10 + i, Reconcile: true, Before: now})
			return err
		}},
		{"due: dispatch", func(i int) error {
			_, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: 10 + i, Dispatch: true, Before: now})
			return err
		}},
		{"find transactions", func(i int) error {
			_, err := s.FindTransactions(ctx, "TX-1", 10+i)
			return err
		}},
		{"events", func(i int) error {
			_, _, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m, Mode: mode, Type: "payment.success"}, page(i))
			return err
		}},
		{"events by delivery status", func(i int) error {
			st := []xaalis.DeliveryStatus{xaalis.DeliveryPending, xaalis.DeliverySucceeded, xaalis.DeliveryFailed}[i%3]
			_, _, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m, Mode: mode, DeliveryStatus: st}, page(i))
			return err
		}},
		{"event stream", func(i int) error {
			_, err := s.StreamEvents(ctx, m, mode, xaalis.StreamCursor{Pos: int64(i)}, 10+i)
			return err
		}},
		{"customers", func(i int) error {
			_, _, err := s.Customers(ctx, xaalis.CustomerFilter{MerchantID: m, Mode: mode}, page(i))
			return err
		}},
		{"plans", func(i int) error {
			_, _, err := s.Plans(ctx, xaalis.PlanFilter{MerchantID: m, Mode: mode}, page(i))
			return err
		}},
		{"disputes by status", func(i int) error {
			st := []xaalis.DisputeStatus{xaalis.DisputeNeedsResponse, xaalis.DisputeWon, xaalis.DisputeLost}[i%3]
			_, _, err := s.Disputes(ctx, m, mode, st, page(i))
			return err
		}},
		{"due disputes", func(i int) error {
			_, err := s.DueDisputes(ctx, now, 10+i)
			return err
		}},
		{"subscriptions by status", func(i int) error {
			st := []xaalis.SubscriptionStatus{xaalis.SubscriptionActive, xaalis.SubscriptionCancelled, xaalis.SubscriptionExpired}[i%3]
			_, _, err := s.Subscriptions(ctx, m, mode, st, page(i))
			return err
		}},
		{"due subscriptions", func(i int) error {
			_, err := s.DueSubscriptions(ctx, now, 10+i)
			return err
		}},
		{"payout requests", func(i int) error {
			_, err := s.PayoutRequests(ctx, m, mode, 10+i)
			return err
		}},
		{"settlements", func(i int) error {
			_, _, err := s.Settlements(ctx, m, mode, page(i))
			return err
		}},
		{"payout request queue", func(i int) error {
			st := []xaalis.PayoutRequestStatus{xaalis.PRSubmitted, xaalis.PRApproved, xaalis.PRCompleted}[i%3]
			_, _, err := s.PayoutRequestQueue(ctx, []xaalis.PayoutRequestStatus{st}, page(i))
			return err
		}},
		{"open disputes", func(i int) error {
			_, _, err := s.OpenDisputes(ctx, page(i))
			return err
		}},
		{"merchants", func(i int) error {
			_, _, err := s.Merchants(ctx, xaalis.MerchantFilter{Query: "shop"}, page(i))
			return err
		}},
		{"audit log", func(i int) error {
			_, _, err := s.AuditLog(ctx, page(i))
			return err
		}},
		{"webhook backlog", func(i int) error {
			_, err := s.WebhookBacklog(ctx, 100+i, 10+i)
			return err
		}},
	} {
		if err := c.read(0); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		before := count()
		for i := 1; i < 4; i++ {
			if err := c.read(i); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
		}
		if n := count() - before; n != 0 {
			t.Errorf("%s: %d SELECTs compiled again in 3 calls with other values, want 0", c.name, n)
		}
	}
}
