package storetest

import (
	"context"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Read is one of a store's list or due queries, run again with the i-th
// set of filter values.
type Read struct {
	Name string
	Run  func(ctx context.Context, i int) error
}

// Reads returns every list and due query of s, for the backends' tests
// that a statement is prepared and planned once per connection, not again
// at each call. Filter values change with i; each call's page and limit
// are page(i) and limit(i), so a backend that keeps the limit a
// parameter can prove that a new limit is not a new plan, and one that
// writes it into the statement can hold it still.
func Reads(s xaalis.Store, page func(i int) xaalis.PageRequest, limit func(i int) int) []Read {
	now := time.Now()
	m, mode := "mer_reads", xaalis.ModeTest
	types := []xaalis.TxType{xaalis.TypePayment, xaalis.TypePayout, xaalis.TypeRefund}
	statuses := []xaalis.Status{xaalis.StatusPending, xaalis.StatusSuccess, xaalis.StatusFailed}
	return []Read{
		{"transactions", func(ctx context.Context, i int) error {
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode}, page(i))
			return err
		}},
		{"transactions by type", func(ctx context.Context, i int) error {
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode, Type: types[i%3]}, page(i))
			return err
		}},
		{"transactions by type and status", func(ctx context.Context, i int) error {
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode, Type: types[i%3], Status: statuses[i%3]}, page(i))
			return err
		}},
		{"transactions by status, provider and dates", func(ctx context.Context, i int) error {
			from, to := now.Add(-time.Hour), now
			_, _, err := s.Transactions(ctx, xaalis.TxFilter{MerchantID: m, Mode: mode, Status: statuses[i%3], Provider: "channel_a", From: &from, To: &to}, page(i))
			return err
		}},
		{"due: expired", func(ctx context.Context, i int) error {
			_, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: limit(i), Expired: true})
			return err
		}},
		{"due: reconcile", func(ctx context.Context, i int) error {
			_, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: limit(i), Reconcile: true, Before: now})
			return err
		}},
		{"due: dispatch", func(ctx context.Context, i int) error {
			_, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: limit(i), Dispatch: true, Before: now})
			return err
		}},
		{"find transactions", func(ctx context.Context, i int) error {
			_, err := s.FindTransactions(ctx, "TX-1", limit(i))
			return err
		}},
		{"events", func(ctx context.Context, i int) error {
			_, _, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m, Mode: mode, Type: "payment.success"}, page(i))
			return err
		}},
		{"events by delivery status", func(ctx context.Context, i int) error {
			st := []xaalis.DeliveryStatus{xaalis.DeliveryPending, xaalis.DeliverySucceeded, xaalis.DeliveryFailed}[i%3]
			_, _, err := s.ListEvents(ctx, xaalis.EventFilter{MerchantID: m, Mode: mode, DeliveryStatus: st}, page(i))
			return err
		}},
		{"event stream", func(ctx context.Context, i int) error {
			_, err := s.StreamEvents(ctx, m, mode, xaalis.StreamCursor{Pos: int64(i)}, limit(i))
			return err
		}},
		{"customers", func(ctx context.Context, i int) error {
			_, _, err := s.Customers(ctx, xaalis.CustomerFilter{MerchantID: m, Mode: mode}, page(i))
			return err
		}},
		{"plans", func(ctx context.Context, i int) error {
			_, _, err := s.Plans(ctx, xaalis.PlanFilter{MerchantID: m, Mode: mode}, page(i))
			return err
		}},
		{"disputes by status", func(ctx context.Context, i int) error {
			st := []xaalis.DisputeStatus{xaalis.DisputeNeedsResponse, xaalis.DisputeWon, xaalis.DisputeLost}[i%3]
			_, _, err := s.Disputes(ctx, m, mode, st, page(i))
			return err
		}},
		{"due disputes", func(ctx context.Context, i int) error {
			_, err := s.DueDisputes(ctx, now, limit(i))
			return err
		}},
		{"subscriptions by status", func(ctx context.Context, i int) error {
			st := []xaalis.SubscriptionStatus{xaalis.SubscriptionActive, xaalis.SubscriptionCancelled, xaalis.SubscriptionExpired}[i%3]
			_, _, err := s.Subscriptions(ctx, m, mode, st, page(i))
			return err
		}},
		{"due subscriptions", func(ctx context.Context, i int) error {
			_, err := s.DueSubscriptions(ctx, now, limit(i))
			return err
		}},
		{"payout requests", func(ctx context.Context, i int) error {
			_, err := s.PayoutRequests(ctx, m, mode, limit(i))
			return err
		}},
		{"settlements", func(ctx context.Context, i int) error {
			_, _, err := s.Settlements(ctx, m, mode, page(i))
			return err
		}},
		{"payout request queue", func(ctx context.Context, i int) error {
			st := []xaalis.PayoutRequestStatus{xaalis.PRSubmitted, xaalis.PRApproved, xaalis.PRCompleted}[i%3]
			_, _, err := s.PayoutRequestQueue(ctx, []xaalis.PayoutRequestStatus{st}, page(i))
			return err
		}},
		{"open disputes", func(ctx context.Context, i int) error {
			_, _, err := s.OpenDisputes(ctx, page(i))
			return err
		}},
		{"merchants", func(ctx context.Context, i int) error {
			_, _, err := s.Merchants(ctx, xaalis.MerchantFilter{Query: "shop"}, page(i))
			return err
		}},
		{"audit log", func(ctx context.Context, i int) error {
			_, _, err := s.AuditLog(ctx, page(i))
			return err
		}},
		{"webhook backlog", func(ctx context.Context, i int) error {
			_, err := s.WebhookBacklog(ctx, 100+limit(i), limit(i))
			return err
		}},
	}
}
