package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func addStats(t testing.TB, s xaalis.Store, day int64, shard int, ds ...xaalis.StatDelta) {
	t.Helper()
	ctx := context.Background()
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.AddStats(ctx, day, shard, ds...) }); err != nil {
		t.Fatalf("add stats: %v", err)
	}
}

func statMap(t testing.TB, s xaalis.Store, from int64) map[string][2]int64 {
	t.Helper()
	list, err := s.StatTotals(context.Background(), from)
	if err != nil {
		t.Fatalf("stat totals: %v", err)
	}
	out := map[string][2]int64{}
	for _, x := range list {
		out[x.Metric+"/"+x.Key] = [2]int64{x.Count, x.Amount}
	}
	return out
}

// testStats: counters add up across days and shards, today reads one day,
// and folding old days changes no total, even when two folds race.
func testStats(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	today := xaalis.VolumeDay(t0)
	pay := xaalis.PaymentStatKey{Mode: xaalis.ModeLive, Provider: "channel_a", Country: "SN", Status: xaalis.StatusSuccess}.String()
	for day := today - 5; day <= today; day++ {
		for shard := range 3 {
			addStats(t, s, day, shard, xaalis.StatDelta{Metric: xaalis.StatPayments, Key: pay, Count: 1, Amount: 500000},
				xaalis.StatDelta{Metric: xaalis.StatDeliveries, Key: "succeeded", Count: 2})
		}
	}
	addStats(t, s, today, 0, xaalis.StatDelta{Metric: xaalis.StatPayments, Key: pay, Count: 1, Amount: 100})
	want := map[string][2]int64{"payments/" + pay: {19, 9_000_100}, "webhook_deliveries/succeeded": {36, 0}}
	if got := statMap(t, s, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("totals %v, want %v", got, want)
	}
	wantToday := map[string][2]int64{"payments/" + pay: {4, 1_500_100}, "webhook_deliveries/succeeded": {6, 0}}
	if got := statMap(t, s, today); !reflect.DeepEqual(got, wantToday) {
		t.Fatalf("today %v, want %v", got, wantToday)
	}

	// Concurrent commands add up.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Update(ctx, func(tx xaalis.Tx) error {
				return tx.AddStats(ctx, today, i%xaalis.StatShards, xaalis.StatDelta{Metric: xaalis.StatDeliveries, Key: "failed", Count: 1})
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	want["webhook_deliveries/failed"] = [2]int64{16, 0}

	// Two folds at once: the days before yesterday move to the folded day
	// once.
	var folded [2]int64
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := s.CompactStats(ctx, today-1)
			if err != nil {
				t.Error(err)
			}
			folded[i] = n
		}()
	}
	wg.Wait()
	// One fold moved the rows (how many depends on how the store spreads a
	// counter over its shards), the other found none left.
	if (folded[0] == 0) == (folded[1] == 0) {
		t.Fatalf("folded %v rows: want one fold to move them and the other none", folded)
	}
	if got := statMap(t, s, 0); !reflect.DeepEqual(got, want) {
		t.Fatalf("totals after folding %v, want %v", got, want)
	}
	if got := statMap(t, s, today-1); got["payments/"+pay] != [2]int64{7, 3_000_100} {
		t.Fatalf("yesterday and today after folding: %v", got)
	}
	if got := statMap(t, s, 1); got["payments/"+pay] != [2]int64{7, 3_000_100} {
		t.Fatalf("the folded rows live on day 0: %v", got)
	}
	if n, err := s.CompactStats(ctx, today-1); err != nil || n != 0 {
		t.Fatalf("folding again: %d, %v", n, err)
	}
	if k, ok := xaalis.ParsePaymentStatKey(pay); !ok || k.Provider != "channel_a" || k.Status != xaalis.StatusSuccess {
		t.Fatalf("parse key: %+v %v", k, ok)
	}
}

// testWebhookBacklog: pending deliveries are counted up to a cap, the
// oldest is found, and the URLs being retried are grouped.
func testWebhookBacklog(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	b, err := s.WebhookBacklog(ctx, 10, 5)
	if err != nil || b.Pending != 0 || !b.OldestPending.IsZero() || len(b.Failing) != 0 || b.Saturated {
		t.Fatalf("empty backlog: %+v, %v", b, err)
	}
	m := NewMerchant(t, s)
	w := newEndpoint(m, xaalis.ModeLive, t0)
	insertEndpoint(t, s, w)
	var ds []*xaalis.Delivery
	for i := range 4 {
		e := insertEvent(t, s, m, xaalis.ModeLive, xaalis.EventPaymentSuccess, t0.Add(time.Duration(i)*time.Minute))
		d := newDelivery(e, w.ID, t0.Add(time.Hour))
		d.URL = w.URL
		ds = append(ds, d)
	}
	cb := newDelivery(insertEvent(t, s, m, xaalis.ModeLive, xaalis.EventPaymentFailed, t0.Add(-time.Minute)), "", t0)
	done := newDelivery(insertEvent(t, s, m, xaalis.ModeLive, xaalis.EventPaymentFailed, t0.Add(-time.Hour)), "", t0)
	insertDeliveries(t, s, append(ds, cb, done)...)
	// Two of the endpoint's deliveries failed once; the callback one and
	// the others were not tried; one delivery succeeded.
	for _, d := range []*xaalis.Delivery{ds[1], ds[2]} {
		at := t0.Add(10 * time.Minute)
		d.Attempts, d.LastAttemptAt, d.NextAttemptAt = 1, &at, t0.Add(20*time.Minute)
		if err := s.RecordAttempt(ctx, d, &xaalis.Attempt{ID: xaalis.NewUUIDv7(), DeliveryID: d.ID, AttemptedAt: at, HTTPStatus: 500}); err != nil {
			t.Fatal(err)
		}
	}
	at := t0.Add(5 * time.Minute)
	done.Status, done.Attempts, done.LastAttemptAt = xaalis.DeliverySucceeded, 1, &at
	if err := s.RecordAttempt(ctx, done, &xaalis.Attempt{ID: xaalis.NewUUIDv7(), DeliveryID: done.ID, AttemptedAt: at, HTTPStatus: 200}); err != nil {
		t.Fatal(err)
	}
	b, err = s.WebhookBacklog(ctx, 100, 5)
	if err != nil || b.Pending != 5 || b.Saturated || !b.OldestPending.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("backlog: %+v, %v", b, err)
	}
	want := []xaalis.FailingEndpoint{{MerchantID: m.ID, Mode: xaalis.ModeLive, EndpointID: w.ID, URL: w.URL, Pending: 2,
		Oldest: t0.Add(time.Minute), LastAttemptAt: t0.Add(10 * time.Minute)}}
	if !reflect.DeepEqual(b.Failing, want) {
		t.Fatalf("failing %+v, want %+v", b.Failing, want)
	}
	if b, err = s.WebhookBacklog(ctx, 3, 0); err != nil || b.Pending != 3 || !b.Saturated || b.Failing != nil {
		t.Fatalf("capped: %+v, %v", b, err)
	}
	// RecordAttempt counted the three attempts by result.
	got := statMap(t, s, 0)
	if got["webhook_deliveries/retrying"][0] != 2 || got["webhook_deliveries/succeeded"][0] != 1 {
		t.Fatalf("attempts counted: %v", got)
	}
}

// testJobsDue: each job's oldest due item, and nothing for items not yet
// due.
func testJobsDue(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	now := t0.Add(24 * time.Hour)
	q := xaalis.JobsDueQuery{Now: now, ReconcileBefore: now.Add(-time.Minute), DispatchBefore: now.Add(-2 * time.Minute)}
	due, err := s.JobsDue(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range xaalis.Jobs {
		if v, ok := due[j]; !ok || !v.IsZero() {
			t.Fatalf("empty store: %s due at %v (%v)", j, v, ok)
		}
	}
	m := NewMerchant(t, s)
	// expire: two open payments past expiry, one not yet.
	for _, exp := range []time.Duration{-3 * time.Hour, -time.Hour, time.Hour} {
		x := NewPayment(m, xaalis.ModeTest, "", now.Add(-4*time.Hour))
		x.ExpiresAt = now.Add(exp)
		insertTx(t, s, x)
	}
	// reconcile: a pending payment with a provider reference polled 10
	// minutes ago.
	p := NewPayment(m, xaalis.ModeLive, "", now.Add(-time.Hour))
	p.Status, p.Provider, p.ProviderRef, p.ExpiresAt = xaalis.StatusPending, "channel_a", "col_1", now.Add(time.Hour)
	polled := now.Add(-10 * time.Minute)
	p.ReconciledAt = &polled
	insertTx(t, s, p)
	// disputes: one past its deadline.
	d := newDispute(storedPayment(t, s, m, xaalis.ModeLive, t0), xaalis.DisputeNeedsResponse, t0)
	d.DueBy = now.Add(-30 * time.Minute)
	insertDispute(t, s, d)
	// subscriptions: one due an hour ago.
	sub := newSubscription(newPlan(t, s, m, xaalis.ModeTest), newCustomer(t, s, m, xaalis.ModeTest, "+221770000050", t0), t0)
	sub.NextActionAt = now.Add(-time.Hour)
	insertSubscription(t, s, sub)
	// dispatch: a payout created 5 minutes ago, never sent.
	insertTx(t, s, newChild(m, xaalis.ModeLive, xaalis.TypePayout, "", xaalis.StatusInitiated, 1000, now.Add(-5*time.Minute)))
	// webhooks: a delivery due 40 minutes ago, one due later.
	e := insertEvent(t, s, m, xaalis.ModeTest, xaalis.EventPaymentSuccess, t0)
	insertDeliveries(t, s, newDelivery(e, "", now.Add(-40*time.Minute)), newDelivery(e, "", now.Add(time.Minute)))

	if due, err = s.JobsDue(ctx, q); err != nil {
		t.Fatal(err)
	}
	if !due[xaalis.JobReconcile].Equal(polled.Add(time.Minute)) {
		t.Fatalf("reconcile due at %v before any late poll", due[xaalis.JobReconcile])
	}
	// reconcile again: a closed payment's late poll due before the
	// pending payment's poll, and one not yet due.
	late := time.Time{}
	for _, at := range []time.Duration{-20 * time.Minute, time.Hour} {
		x := NewPayment(m, xaalis.ModeLive, "", now.Add(-2*time.Hour))
		x.Status, x.Provider, x.ProviderRef = xaalis.StatusExpired, "channel_a", xaalis.NewUUIDv7()
		insertTx(t, s, x)
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.SetLatePoll(ctx, x.ID, now.Add(at)) }); err != nil {
			t.Fatal(err)
		}
		if late.IsZero() {
			late = now.Add(at)
		}
	}
	if due, err = s.JobsDue(ctx, q); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{
		xaalis.JobExpire:        now.Add(-3 * time.Hour),
		xaalis.JobReconcile:     late,
		xaalis.JobDisputes:      d.DueBy,
		xaalis.JobSubscriptions: sub.NextActionAt,
		xaalis.JobDispatch:      now.Add(-5 * time.Minute).Add(2 * time.Minute),
		xaalis.JobWebhooks:      now.Add(-40 * time.Minute),
	}
	for j, w := range want {
		if !due[j].Equal(w) {
			t.Errorf("%s due at %v, want %v", j, due[j], w)
		}
	}
}

// testLatePolls: a closed payment's late poll is set, moved and stopped;
// DueTransactions(LatePoll) returns the payments due, oldest poll first,
// up to the limit.
func testLatePolls(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	m := NewMerchant(t, s)
	set := func(id string, at time.Time) {
		t.Helper()
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.SetLatePoll(ctx, id, at) }); err != nil {
			t.Fatal(err)
		}
	}
	due := func(now time.Time, limit int) []string {
		t.Helper()
		list, err := s.DueTransactions(ctx, xaalis.DueQuery{Now: now, Limit: limit, LatePoll: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := make([]string, len(list))
		for i, x := range list {
			ids[i] = x.ID
		}
		slices.Sort(ids)
		return ids
	}
	var ids []string
	for i := range 3 {
		x := NewPayment(m, xaalis.ModeLive, "", t0)
		x.Status, x.Provider, x.ProviderRef = xaalis.StatusCancelled, "channel_a", xaalis.NewUUIDv7()
		insertTx(t, s, x)
		set(x.ID, t0.Add(time.Duration(i+1)*time.Minute))
		ids = append(ids, x.ID)
	}
	// A payment with no poll, and a poll stopped that never was: nothing.
	other := NewPayment(m, xaalis.ModeLive, "", t0)
	insertTx(t, s, other)
	set(other.ID, time.Time{})
	if got := due(t0, 10); len(got) != 0 {
		t.Fatalf("due before any poll's time: %v", got)
	}
	if got := due(t0.Add(2*time.Minute), 10); !slices.Equal(got, sorted(ids[0], ids[1])) {
		t.Fatalf("due at 2 min: %v, want %v", got, ids[:2])
	}
	if got := due(t0.Add(time.Hour), 1); !slices.Equal(got, ids[:1]) {
		t.Fatalf("the oldest poll first: %v, want %v", got, ids[:1])
	}
	// Moved later, then stopped.
	set(ids[0], t0.Add(time.Hour))
	set(ids[1], time.Time{})
	if got := due(t0.Add(5*time.Minute), 10); !slices.Equal(got, ids[2:]) {
		t.Fatalf("due after a poll moved and one stopped: %v, want %v", got, ids[2:])
	}
	if got := due(t0.Add(time.Hour), 10); !slices.Equal(got, sorted(ids[0], ids[2])) {
		t.Fatalf("due at an hour: %v", got)
	}
}

// sorted returns ids in order.
func sorted(ids ...string) []string {
	slices.Sort(ids)
	return ids
}

// testLedgerChecks: the last recorded check is the newest.
func testLedgerChecks(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	if _, err := s.LastLedgerCheck(ctx); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("no check yet: %v", err)
	}
	a := &xaalis.LedgerCheckRun{ID: xaalis.NewUUIDv7(), At: t0, Duration: 1500 * time.Millisecond, Problems: 0, Detail: []string{}, Actor: "schedule"}
	b := &xaalis.LedgerCheckRun{ID: xaalis.NewUUIDv7(), At: t0.Add(time.Hour), Duration: 20 * time.Millisecond, Problems: 2,
		Detail: []string{"account m:x (XOF): cached balance 1, postings sum to 0", "entry e sums to 3 XOF"}, Actor: "ops"}
	for _, c := range []*xaalis.LedgerCheckRun{b, a} {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertLedgerCheck(ctx, c) }); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LastLedgerCheck(ctx)
	if err != nil || !reflect.DeepEqual(got, b) {
		t.Fatalf("last check %+v, %v; want %+v", got, err, b)
	}
}

// testRateCount reads a window without counting.
func testRateCount(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	w := t0.Truncate(15 * time.Minute)
	if n, err := s.RateCount(ctx, "console_sign_in:127.0.0.1", w); err != nil || n != 0 {
		t.Fatalf("empty: %d, %v", n, err)
	}
	for range 3 {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { _, err := tx.CountRate(ctx, "console_sign_in:127.0.0.1", w); return err }); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if n, err := s.RateCount(ctx, "console_sign_in:127.0.0.1", w); err != nil || n != 3 {
			t.Fatalf("after three: %d, %v", n, err)
		}
	}
	if n, err := s.RateCount(ctx, "console_sign_in:127.0.0.1", w.Add(15*time.Minute)); err != nil || n != 0 {
		t.Fatalf("next window: %d, %v", n, err)
	}
}

// testOperatorSessions: a session is found by its hash with its token,
// touched, ended, and purged when idle.
func testOperatorSessions(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	hash := func(v string) []byte { h := sha256.Sum256([]byte(v)); return h[:] }
	tok := &xaalis.OperatorToken{ID: xaalis.NewUUIDv7(), Name: "ops", Hash: hash("tok"), CreatedAt: t0}
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertOperatorToken(ctx, tok) }); err != nil {
		t.Fatal(err)
	}
	a := &xaalis.OperatorSession{ID: xaalis.NewUUIDv7(), Hash: hash("a"), TokenID: tok.ID, CreatedAt: t0, LastSeenAt: t0, ClientIP: "127.0.0.1"}
	b := &xaalis.OperatorSession{ID: xaalis.NewUUIDv7(), Hash: hash("b"), TokenID: tok.ID, CreatedAt: t0, LastSeenAt: t0.Add(time.Hour)}
	for _, x := range []*xaalis.OperatorSession{a, b} {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.InsertOperatorSession(ctx, x) }); err != nil {
			t.Fatal(err)
		}
	}
	got, gt, err := s.OperatorSessionByHash(ctx, a.Hash)
	if err != nil || !reflect.DeepEqual(got, a) || !reflect.DeepEqual(gt, tok) {
		t.Fatalf("by hash: %+v %+v, %v", got, gt, err)
	}
	if _, _, err := s.OperatorSessionByHash(ctx, hash("nope")); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	seen := t0.Add(2 * time.Hour)
	if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.TouchOperatorSession(ctx, a.ID, seen) }); err != nil {
		t.Fatal(err)
	}
	if got, _, err := s.OperatorSessionByHash(ctx, a.Hash); err != nil || !got.LastSeenAt.Equal(seen) {
		t.Fatalf("touched: %+v, %v", got, err)
	}
	var n int64
	if err := s.Update(ctx, func(tx xaalis.Tx) (err error) {
		n, err = tx.PurgeOperatorSessions(ctx, t0.Add(90*time.Minute))
		return err
	}); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if _, _, err := s.OperatorSessionByHash(ctx, b.Hash); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("purged session found: %v", err)
	}
	for range 2 {
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.DeleteOperatorSession(ctx, a.ID) }); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.OperatorSessionByHash(ctx, a.Hash); !errors.Is(err, xaalis.ErrNotFound) {
		t.Fatalf("deleted session found: %v", err)
	}
}

func merchantIDs(ms []*xaalis.Merchant) []string {
	return pluck(ms, func(x *xaalis.Merchant) string { return x.ID })
}

func txIDs(ts []*xaalis.Transaction) []string {
	return pluck(ts, func(x *xaalis.Transaction) string { return x.ID })
}

// testOpsLists: the console's lists across merchants.
func testOpsLists(t *testing.T, s xaalis.Store) {
	ctx := context.Background()
	page := xaalis.PageRequest{Page: 1, PerPage: 10}
	var ms []*xaalis.Merchant
	for i, name := range []string{"Boutique Thiès", "Pharmacie 100% Dakar", "Librairie Kaolack"} {
		m := &xaalis.Merchant{ID: xaalis.NewUUIDv7(), Name: name, Country: "SN", SettlementCurrency: xaalis.XOF,
			Status: xaalis.MerchantActive, KYC: xaalis.KYCPending, PayoutsEnabled: true,
			CreatedAt: t0.Add(time.Duration(i) * time.Minute), UpdatedAt: t0}
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateMerchant(ctx, m) }); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"", []string{ms[2].ID, ms[1].ID, ms[0].ID}},
		{"boutique", []string{ms[0].ID}},
		{"LIBRAIRIE", []string{ms[2].ID}},
		{"100%", []string{ms[1].ID}},
		{"%", []string{ms[1].ID}},
		{"_", nil},
		{ms[1].ID[:30], []string{ms[1].ID}},
		{"nothing", nil},
	} {
		list, total, err := s.Merchants(ctx, xaalis.MerchantFilter{Query: c.q}, page)
		if err != nil || !slices.Equal(merchantIDs(list), append([]string{}, c.want...)) || total != len(c.want) {
			t.Errorf("merchants %q: %v (%d), %v; want %v", c.q, merchantIDs(list), total, err, c.want)
		}
	}
	if list, total, err := s.Merchants(ctx, xaalis.MerchantFilter{}, xaalis.PageRequest{Page: 2, PerPage: 2}); err != nil ||
		total != 3 || len(list) != 1 || list[0].ID != ms[0].ID {
		t.Errorf("second page: %v %d %v", merchantIDs(list), total, err)
	}

	// Keys, newest first.
	var keys []*xaalis.Key
	for i := range 2 {
		k, _ := xaalis.NewKey(xaalis.NewUUIDv7(), ms[0].ID, xaalis.KeySecret, xaalis.ModeTest, xaalis.AllScopes, nil, nil,
			[]byte("pepper"), t0.Add(time.Duration(i)*time.Minute))
		if err := s.Update(ctx, func(tx xaalis.Tx) error { return tx.CreateKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	got, err := s.Keys(ctx, ms[0].ID)
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], keys[1]) || got[1].ID != keys[0].ID {
		t.Errorf("keys: %+v, %v", got, err)
	}
	if got, err := s.Keys(ctx, ms[1].ID); err != nil || len(got) != 0 {
		t.Errorf("no keys: %+v, %v", got, err)
	}

	// Payout requests: the queue holds submitted and approved ones of
	// every merchant, oldest first.
	var prs []*xaalis.PayoutRequest
	for i, st := range []xaalis.PayoutRequestStatus{xaalis.PRApproved, xaalis.PRSubmitted, xaalis.PRCompleted, xaalis.PRSubmitted} {
		r := newPayoutRequest(ms[i%2], xaalis.ModeLive, t0.Add(time.Duration(3-i)*time.Minute))
		r.Status = st
		insertPR(t, s, r)
		prs = append(prs, r)
	}
	q, total, err := s.PayoutRequestQueue(ctx, []xaalis.PayoutRequestStatus{xaalis.PRSubmitted, xaalis.PRApproved}, page)
	var qids []string
	for _, r := range q {
		qids = append(qids, r.ID)
	}
	if err != nil || total != 3 || !slices.Equal(qids, []string{prs[3].ID, prs[1].ID, prs[0].ID}) {
		t.Errorf("queue: %v (%d), %v", qids, total, err)
	}
	if r, err := s.PayoutRequestByID(ctx, prs[2].ID); err != nil || !reflect.DeepEqual(r, prs[2]) {
		t.Errorf("payout request by id: %+v, %v", r, err)
	}
	if _, err := s.PayoutRequestByID(ctx, "nope"); !errors.Is(err, xaalis.ErrNotFound) {
		t.Errorf("unknown payout request: %v", err)
	}

	// Disputes: the open ones of every merchant, nearest deadline first.
	p0, p1, p2 := storedPayment(t, s, ms[0], xaalis.ModeLive, t0), storedPayment(t, s, ms[1], xaalis.ModeTest, t0), storedPayment(t, s, ms[1], xaalis.ModeLive, t0)
	d0 := newDispute(p0, xaalis.DisputeUnderReview, t0.Add(time.Hour))
	d1 := newDispute(p1, xaalis.DisputeNeedsResponse, t0)
	d2 := newDispute(p2, xaalis.DisputeWon, t0)
	d3 := newDispute(p0, xaalis.DisputeLost, t0.Add(-time.Hour))
	for _, d := range []*xaalis.Dispute{d0, d1, d2, d3} {
		insertDispute(t, s, d)
	}
	open, total, err := s.OpenDisputes(ctx, page)
	if err != nil || total != 2 || len(open) != 2 || open[0].ID != d1.ID || open[1].ID != d0.ID {
		t.Errorf("open disputes: %v (%d), %v", disputeIDs(open), total, err)
	}
	if d, err := s.DisputeByID(ctx, d2.ID); err != nil || d.ID != d2.ID || d.Status != xaalis.DisputeWon {
		t.Errorf("dispute by id: %+v, %v", d, err)
	}
	if ds, err := s.DisputesOf(ctx, p0.ID); err != nil || !slices.Equal(disputeIDs(ds), []string{d3.ID, d0.ID}) {
		t.Errorf("disputes of a payment: %v, %v", disputeIDs(ds), err)
	}

	// Transactions of any merchant by id, reference, merchant_ref and
	// payer phone.
	a := NewPayment(ms[0], xaalis.ModeTest, "order-77", t0)
	a.PayerPhone = "+221771234567"
	b := NewPayment(ms[1], xaalis.ModeLive, "order-77", t0.Add(time.Minute))
	c := NewPayment(ms[1], xaalis.ModeLive, "other", t0.Add(2*time.Minute))
	c.PayerPhone = "+221771234567"
	for _, x := range []*xaalis.Transaction{a, b, c} {
		insertTx(t, s, x)
	}
	refund := newChild(ms[0], xaalis.ModeTest, xaalis.TypeRefund, a.ID, xaalis.StatusSuccess, 1000, t0.Add(time.Hour))
	refund.PayerPhone = ""
	insertTx(t, s, refund)
	for _, c2 := range []struct {
		key  string
		want []string
	}{
		{a.ID, []string{a.ID}},
		{b.Reference, []string{b.ID}},
		{"order-77", []string{b.ID, a.ID}},
		{"+221771234567", []string{c.ID, a.ID}},
		{"", nil},
		{"unknown", nil},
	} {
		found, err := s.FindTransactions(ctx, c2.key, 10)
		if err != nil || !slices.Equal(txIDs(found), append([]string{}, c2.want...)) {
			t.Errorf("find %q: %v, %v; want %v", c2.key, txIDs(found), err, c2.want)
		}
	}
	if found, err := s.FindTransactions(ctx, "order-77", 1); err != nil || len(found) != 1 {
		t.Errorf("limit: %v, %v", txIDs(found), err)
	}
	if kids, err := s.ChildTransactions(ctx, a.ID); err != nil || !slices.Equal(txIDs(kids), []string{refund.ID}) {
		t.Errorf("refunds: %v, %v", txIDs(kids), err)
	}
	if kids, err := s.ChildTransactions(ctx, b.ID); err != nil || len(kids) != 0 {
		t.Errorf("no refunds: %v, %v", txIDs(kids), err)
	}
}
