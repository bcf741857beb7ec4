package xaalis

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
)

// The operator's side of the App: console sessions, the overview, the
// metrics' snapshot, ledger checks, and the lists and views the console
// shows. Every change goes through the same commands as the admin API and
// the CLI, audited under the actor the context carries.

// Console sessions.
const (
	// SessionIdle ends a console session after this long without a
	// request.
	SessionIdle = 12 * time.Hour
	// sessionTouchEvery bounds the writes a session costs: its last
	// activity moves at most once a minute.
	sessionTouchEvery = time.Minute
	// SignInFailures failed sign-ins from one client address within
	// SignInWindow refuse further attempts until the window ends. The
	// count lives in the database, so it holds across processes.
	SignInFailures = 10
	SignInWindow   = 15 * time.Minute
)

func hashSession(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// SignIn opens a console session for an operator token presented from a
// client address: it returns the session, its token and the session's
// secret (the cookie), shown this once. It returns unauthorized for an
// unknown, revoked or expired token, and too_many_requests (RetryAfter)
// once the address failed SignInFailures times in the window; failures
// are counted, successes are not.
func (a *App) SignIn(ctx context.Context, token, client string) (*OperatorSession, *OperatorToken, string, error) {
	now := a.now()
	window := now.Truncate(SignInWindow)
	scope := "console_sign_in:" + client
	n, err := a.Store.RateCount(ctx, scope, window)
	if err != nil {
		return nil, nil, "", fmt.Errorf("read sign-in failures: %w", err)
	}
	if n >= SignInFailures {
		return nil, nil, "", tooMany(window.Add(SignInWindow).Sub(now), "Too many failed sign-ins from this address; retry after Retry-After seconds.")
	}
	t, err := a.AuthenticateOperator(ctx, strings.TrimSpace(token))
	if ErrorCode(err) == EUnauthorized {
		if cerr := a.Store.Update(ctx, func(tx Tx) error {
			_, err := tx.CountRate(ctx, scope, window)
			return err
		}); cerr != nil {
			return nil, nil, "", fmt.Errorf("count sign-in failure: %w", cerr)
		}
		return nil, nil, "", err
	}
	if err != nil {
		return nil, nil, "", err
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, "", err
	}
	secret := base64.RawURLEncoding.EncodeToString(b[:])
	s := &OperatorSession{ID: a.NewID(), Hash: hashSession(secret), TokenID: t.ID, CreatedAt: now, LastSeenAt: now, ClientIP: client}
	actx := WithActor(ctx, Actor{Name: t.Name, TokenID: t.ID, RequestID: ActorFrom(ctx).RequestID, ClientIP: client})
	err = a.Store.Update(ctx, func(tx Tx) error {
		if err := tx.InsertOperatorSession(ctx, s); err != nil {
			return fmt.Errorf("insert session: %w", err)
		}
		return a.audit(actx, tx, "console.sign_in", "operator_session", s.ID, nil,
			map[string]any{"id": s.ID, "operator_token_id": t.ID, "client_ip": client})
	})
	if err != nil {
		return nil, nil, "", err
	}
	return s, t, secret, nil
}

// OperatorSession checks a console session's secret: unauthorized when it
// is unknown, idle for SessionIdle, or its token was revoked or expired
// since. A valid session's last activity moves to now.
func (a *App) OperatorSession(ctx context.Context, secret string) (*OperatorSession, *OperatorToken, error) {
	if secret == "" || len(secret) > 100 {
		return nil, nil, E(EUnauthorized)
	}
	s, t, err := a.Store.OperatorSessionByHash(ctx, hashSession(secret))
	if errors.Is(err, ErrNotFound) {
		return nil, nil, E(EUnauthorized)
	} else if err != nil {
		return nil, nil, fmt.Errorf("read session: %w", err)
	}
	now := a.now()
	if now.Sub(s.LastSeenAt) >= SessionIdle || !t.Usable(now) {
		if err := a.Store.Update(ctx, func(tx Tx) error { return tx.DeleteOperatorSession(ctx, s.ID) }); err != nil {
			return nil, nil, fmt.Errorf("end session: %w", err)
		}
		return nil, nil, E(EUnauthorized)
	}
	if now.Sub(s.LastSeenAt) >= sessionTouchEvery {
		if err := a.Store.Update(ctx, func(tx Tx) error { return tx.TouchOperatorSession(ctx, s.ID, now) }); err != nil {
			return nil, nil, fmt.Errorf("touch session: %w", err)
		}
		s.LastSeenAt = now
	}
	return s, t, nil
}

// SignOut ends a console session at once.
func (a *App) SignOut(ctx context.Context, s *OperatorSession) error {
	return a.Store.Update(ctx, func(tx Tx) error {
		if err := tx.DeleteOperatorSession(ctx, s.ID); err != nil {
			return err
		}
		return a.audit(ctx, tx, "console.sign_out", "operator_session", s.ID, map[string]any{"id": s.ID, "operator_token_id": s.TokenID}, nil)
	})
}

// Housekeeping deletes console sessions idle for SessionIdle and folds old
// stat counters; serve runs it now and then, in any process.
func (a *App) Housekeeping(ctx context.Context) error {
	err := a.Store.Update(ctx, func(tx Tx) error {
		_, err := tx.PurgeOperatorSessions(ctx, a.now().Add(-SessionIdle))
		return err
	})
	if err != nil {
		return fmt.Errorf("purge sessions: %w", err)
	}
	_, err = a.CompactStats(ctx)
	return err
}

// RunLedgerCheck runs the ledger check and records its outcome, the last
// of which the console and the metrics show. An operator's check (any
// door) is audited; the periodic one (scheduled) is recorded as
// "schedule" only.
func (a *App) RunLedgerCheck(ctx context.Context, scheduled bool) (*LedgerCheckRun, []ledger.Problem, error) {
	start := time.Now()
	ps, err := a.LedgerCheck(ctx)
	if err != nil {
		return nil, nil, err
	}
	actor := "schedule"
	if !scheduled {
		actor = ActorFrom(ctx).Name
	}
	run := &LedgerCheckRun{ID: a.NewID(), At: a.now(), Duration: time.Since(start), Problems: len(ps), Detail: []string{}, Actor: actor}
	for i, p := range ps {
		if i == MaxLedgerCheckDetail {
			break
		}
		run.Detail = append(run.Detail, p.String())
	}
	err = a.Store.Update(ctx, func(tx Tx) error {
		if err := tx.InsertLedgerCheck(ctx, run); err != nil {
			return fmt.Errorf("record ledger check: %w", err)
		}
		if scheduled {
			return nil
		}
		return a.audit(ctx, tx, "ledger.check", "ledger_check", run.ID, nil,
			map[string]any{"id": run.ID, "problems": run.Problems})
	})
	if err != nil {
		return nil, nil, err
	}
	return run, ps, nil
}

// LastLedgerCheck returns the newest recorded ledger check, or nil.
func (a *App) LastLedgerCheck(ctx context.Context) (*LedgerCheckRun, error) {
	c, err := a.Store.LastLedgerCheck(ctx)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return c, err
}

// LedgerCheckDue reports whether no ledger check was recorded within
// every: the periodic check runs only then, so that several processes
// share one schedule.
func (a *App) LedgerCheckDue(ctx context.Context, every time.Duration) (bool, error) {
	c, err := a.LastLedgerCheck(ctx)
	if err != nil {
		return false, err
	}
	return c == nil || a.now().Sub(c.At) >= every, nil
}

// ClaimScheduledLedgerCheck claims the periodic ledger check for this
// process: true for one of the processes that find it due at once, none
// again within every. (Each process found it due and ran it: two or three
// whole-ledger reads, and as many records, every interval.) A claim holds
// for LedgerCheckClaim at most: a check that failed, or whose process
// stopped, is run by another then, not an interval later.
func (a *App) ClaimScheduledLedgerCheck(ctx context.Context, every time.Duration) (bool, error) {
	now := a.now()
	stamp := func(t time.Time) []byte { return fmt.Appendf(nil, "%020d", t.UnixMicro()) }
	var ok bool
	err := a.Store.Update(ctx, func(tx Tx) (err error) {
		ok, err = tx.ClaimSetting(ctx, "ledger_check.scheduled", stamp(now), stamp(now.Add(-min(every, LedgerCheckClaim))))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("claim the ledger check: %w", err)
	}
	return ok, nil
}

// LedgerCheckClaim is how long a claim of the periodic ledger check holds
// (ClaimScheduledLedgerCheck).
const LedgerCheckClaim = 5 * time.Minute

// MetricsSnapshot is what the metrics read from the database at scrape
// time: the same in every process.
type MetricsSnapshot struct {
	// Stats are the stat counters summed over every day.
	Stats   []StatTotal
	Backlog WebhookBacklog
	// OldestPendingAge is 0 when no delivery is pending.
	OldestPendingAge time.Duration
	// JobLags is, for each of Jobs, how long its oldest due item waited.
	JobLags map[string]time.Duration
	// LedgerCheck is the last recorded one; nil when none ran.
	LedgerCheck *LedgerCheckRun
}

// MetricsPendingCap bounds the count of pending deliveries a scrape makes.
const MetricsPendingCap = 100_000

// MetricsSnapshot reads the metrics kept in the database. Every query
// reads a bounded number of rows: the stat counters (a few days of rows),
// the pending deliveries up to MetricsPendingCap, and the first row of an
// index per job.
func (a *App) MetricsSnapshot(ctx context.Context) (*MetricsSnapshot, error) {
	now := a.now()
	// This process's replays since the last flush count at once.
	if err := a.FlushReplays(ctx); err != nil {
		return nil, err
	}
	stats, err := a.Store.StatTotals(ctx, StatDayFolded)
	if err != nil {
		return nil, fmt.Errorf("stat counters: %w", err)
	}
	bl, err := a.Store.WebhookBacklog(ctx, MetricsPendingCap, 0)
	if err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	lags, err := a.JobLags(ctx)
	if err != nil {
		return nil, err
	}
	check, err := a.LastLedgerCheck(ctx)
	if err != nil {
		return nil, fmt.Errorf("last ledger check: %w", err)
	}
	s := &MetricsSnapshot{Stats: stats, Backlog: bl, JobLags: lags, LedgerCheck: check}
	if !bl.OldestPending.IsZero() {
		s.OldestPendingAge = max(now.Sub(bl.OldestPending), 0)
	}
	return s, nil
}

// JobLags returns, for each of Jobs, how long its oldest due item has
// waited (0 when nothing is due): the lag of the job runner, whichever
// process runs it.
func (a *App) JobLags(ctx context.Context) (map[string]time.Duration, error) {
	now := a.now()
	due, err := a.Store.JobsDue(ctx, JobsDueQuery{Now: now,
		ReconcileBefore: now.Add(-time.Duration(a.Config.ReconcileAfterSeconds) * time.Second),
		DispatchBefore:  now.Add(-DispatchAfter)})
	if err != nil {
		return nil, fmt.Errorf("jobs due: %w", err)
	}
	out := make(map[string]time.Duration, len(Jobs))
	for _, j := range Jobs {
		out[j] = 0
		if t, ok := due[j]; ok && !t.IsZero() && t.Before(now) {
			out[j] = now.Sub(t)
		}
	}
	return out, nil
}

// PaymentCount is a number of payments and their worth in XOF minor units.
type PaymentCount struct {
	Count  int64
	Amount int64
}

// ProviderDay is one provider's payments of the day in one mode, by the
// status they reached that day.
type ProviderDay struct {
	Mode     Mode
	Provider string // "" for payments whose payer has not chosen yet
	ByStatus map[Status]PaymentCount
}

// Outcomes counts the payments that reached an outcome.
func (p ProviderDay) Outcomes() int64 {
	var n int64
	for _, s := range []Status{StatusSuccess, StatusFailed, StatusCancelled, StatusExpired} {
		n += p.ByStatus[s].Count
	}
	return n
}

// SuccessRate is the share of outcomes that are successes, and false when
// there was no outcome.
func (p ProviderDay) SuccessRate() (float64, bool) {
	n := p.Outcomes()
	if n == 0 {
		return 0, false
	}
	return float64(p.ByStatus[StatusSuccess].Count) / float64(n), true
}

// RouteStatus is one provider route's health in this process.
type RouteStatus struct {
	Provider string
	RouteHealth
}

// JobLag is one job's lag.
type JobLag struct {
	Job string
	Lag time.Duration
}

// Overview is the console's first page.
type Overview struct {
	Now time.Time
	// Today: payments of the UTC day by mode and provider, from the stat
	// counters (each payment counted in every status it reached today).
	Today []ProviderDay
	// Routes are the live routes, with their breakers' states.
	Routes []RouteStatus
	// Unavailable are the configured live routes that cannot be used.
	Unavailable []UnavailableRoute
	Backlog     WebhookBacklog
	Jobs        []JobLag
	LastCheck   *LedgerCheckRun
}

// Overview gathers the console's first page.
func (a *App) Overview(ctx context.Context) (*Overview, error) {
	now := a.now()
	o := &Overview{Now: now, Unavailable: a.Config.UnavailableRoutes()}
	stats, err := a.Store.StatTotals(ctx, VolumeDay(now))
	if err != nil {
		return nil, fmt.Errorf("stat counters: %w", err)
	}
	byKey := map[string]*ProviderDay{}
	for _, s := range stats {
		k, ok := ParsePaymentStatKey(s.Key)
		if s.Metric != StatPayments || !ok {
			continue
		}
		id := string(k.Mode) + "|" + k.Provider
		d := byKey[id]
		if d == nil {
			d = &ProviderDay{Mode: k.Mode, Provider: k.Provider, ByStatus: map[Status]PaymentCount{}}
			byKey[id] = d
		}
		c := d.ByStatus[k.Status]
		c.Count += s.Count
		c.Amount += s.Amount
		d.ByStatus[k.Status] = c
	}
	for _, d := range byKey {
		o.Today = append(o.Today, *d)
	}
	sort.Slice(o.Today, func(i, j int) bool {
		if o.Today[i].Mode != o.Today[j].Mode {
			return o.Today[i].Mode == ModeLive
		}
		return o.Today[i].Provider < o.Today[j].Provider
	})
	if a.Gateway != nil {
		o.Routes = a.LiveRoutes()
	}
	if o.Backlog, err = a.Store.WebhookBacklog(ctx, MetricsPendingCap, 20); err != nil {
		return nil, fmt.Errorf("webhook backlog: %w", err)
	}
	lags, err := a.JobLags(ctx)
	if err != nil {
		return nil, err
	}
	for _, j := range Jobs {
		o.Jobs = append(o.Jobs, JobLag{Job: j, Lag: lags[j]})
	}
	if o.LastCheck, err = a.LastLedgerCheck(ctx); err != nil {
		return nil, fmt.Errorf("last ledger check: %w", err)
	}
	return o, nil
}

// LiveRoutes lists the usable live routes of the enabled providers with
// their breakers' states in this process.
func (a *App) LiveRoutes() []RouteStatus {
	var out []RouteStatus
	for _, p := range Providers {
		if spec, ok := a.Config.Providers[p]; !ok || !spec.Enabled {
			continue
		}
		for _, h := range a.Gateway.Health(ModeLive, p) {
			out = append(out, RouteStatus{Provider: p, RouteHealth: h})
		}
	}
	return out
}

// MerchantView is a merchant as the console shows it.
type MerchantView struct {
	Merchant *Merchant
	Keys     []*Key
	// Balances by mode.
	Balances map[Mode]*Balance
	// Recent transactions by mode, newest first.
	Recent map[Mode][]*Transaction
}

// Merchants lists merchants for the console.
func (a *App) Merchants(ctx context.Context, f MerchantFilter, page PageRequest) ([]*Merchant, Pagination, error) {
	f.Query = strings.TrimSpace(f.Query)
	list, total, err := a.Store.Merchants(ctx, f, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list merchants: %w", err)
	}
	return list, NewPagination(page, total), nil
}

// MerchantView reads a merchant, its keys, its balances and its recent
// transactions in both modes; not_found.
func (a *App) MerchantView(ctx context.Context, id string, recent int) (*MerchantView, error) {
	m, err := a.Store.Merchant(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &MerchantView{Merchant: m, Balances: map[Mode]*Balance{}, Recent: map[Mode][]*Transaction{}}
	if v.Keys, err = a.Store.Keys(ctx, id); err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	for _, mode := range []Mode{ModeLive, ModeTest} {
		if v.Balances[mode], err = a.MerchantBalance(ctx, m, mode); err != nil {
			return nil, err
		}
		list, _, err := a.Store.Transactions(ctx, TxFilter{MerchantID: id, Mode: mode}, PageRequest{Page: 1, PerPage: recent})
		if err != nil {
			return nil, fmt.Errorf("recent transactions: %w", err)
		}
		for _, t := range list {
			a.decorate(t)
		}
		v.Recent[mode] = list
	}
	return v, nil
}

// PayoutRequestQueue lists the payout requests waiting for an operator
// (submitted, then approved), oldest first.
func (a *App) PayoutRequestQueue(ctx context.Context, page PageRequest) ([]*PayoutRequest, Pagination, error) {
	list, total, err := a.Store.PayoutRequestQueue(ctx, []PayoutRequestStatus{PRSubmitted, PRApproved}, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("payout request queue: %w", err)
	}
	return list, NewPagination(page, total), nil
}

// PayoutRequestView is a payout request with its merchant and events.
type PayoutRequestView struct {
	Request  *PayoutRequest
	Merchant *Merchant
	Events   []*Event
}

// OperatorPayoutRequest reads any merchant's payout request with its
// events; not_found.
func (a *App) OperatorPayoutRequest(ctx context.Context, id string) (*PayoutRequestView, error) {
	r, err := a.Store.PayoutRequestByID(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &PayoutRequestView{Request: r}
	if v.Merchant, err = a.Store.Merchant(ctx, r.MerchantID); err != nil {
		return nil, err
	}
	if v.Events, err = a.Store.Events(ctx, r.ID); err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	return v, nil
}

// OpenDisputes lists the open disputes of every merchant, nearest
// deadline first.
func (a *App) OpenDisputes(ctx context.Context, page PageRequest) ([]*Dispute, Pagination, error) {
	list, total, err := a.Store.OpenDisputes(ctx, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("open disputes: %w", err)
	}
	return list, NewPagination(page, total), nil
}

// OperatorDispute reads any merchant's dispute; not_found.
func (a *App) OperatorDispute(ctx context.Context, id string) (*Dispute, error) {
	return a.Store.DisputeByID(ctx, id)
}

// MaxFound bounds a console search.
const MaxFound = 50

// FindTransactions finds the transactions of any merchant whose id,
// reference, merchant_ref or payer phone is key. A phone number may be
// given in any form ParsePhone reads for any UEMOA country.
func (a *App) FindTransactions(ctx context.Context, key string) ([]*Transaction, error) {
	key = strings.TrimSpace(key)
	if key == "" || len(key) > 255 {
		return nil, nil
	}
	keys := []string{key}
	if strings.HasPrefix(key, "+") || strings.Trim(key, "0123456789 ") == "" {
		if p, err := ParsePhone(key, "SN"); err == nil && p != key {
			keys = append(keys, p)
		}
	}
	var out []*Transaction
	seen := map[string]bool{}
	for _, k := range keys {
		list, err := a.Store.FindTransactions(ctx, k, MaxFound)
		if err != nil {
			return nil, fmt.Errorf("find transactions: %w", err)
		}
		for _, t := range list {
			if !seen[t.ID] {
				seen[t.ID] = true
				out = append(out, a.decorate(t))
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.After(out[j].CreatedAt) })
	return out, nil
}

// OperatorTransactionID resolves what an operator names a transaction by
// (the console, the admin API and the CLI alike): its id, its TXN-
// reference, or a merchant_ref, which must name one payment of all the
// merchants' (else validation_error; not_found when nothing matches).
func (a *App) OperatorTransactionID(ctx context.Context, key string) (string, error) {
	return a.operatorTransactionID(ctx, key, TypePayment)
}

// operatorTransactionID is OperatorTransactionID where a merchant_ref
// names a record of type typ: one of them, among all the merchants'
// (a payout's merchant_ref may also be some payment's).
func (a *App) operatorTransactionID(ctx context.Context, key string, typ TxType) (string, error) {
	key = strings.TrimSpace(key)
	found, err := a.FindTransactions(ctx, key)
	if err != nil {
		return "", err
	}
	// An id wins, and so does a TXN- reference (unique across merchants):
	// a merchant_ref may be written like either (merchants use UUIDs as
	// order numbers). An id may be given in upper case.
	for _, t := range found {
		if t.ID == key || t.Reference == key {
			return t.ID, nil
		}
	}
	if low := strings.ToLower(key); low != key && isUUID(low) {
		if _, err := a.Store.Transaction(ctx, "", low); err == nil {
			return low, nil
		} else if !errors.Is(err, ErrNotFound) {
			return "", err
		}
	}
	var all, pays []*Transaction
	for _, t := range found {
		if t.MerchantRef == key {
			all = append(all, t)
			if t.Type == typ {
				pays = append(pays, t)
			}
		}
	}
	switch {
	case len(pays) == 1:
		return pays[0].ID, nil
	case len(all) == 1:
		return all[0].ID, nil
	case len(all) == 0:
		return "", ErrNotFound
	}
	return "", &Error{Code: EValidation, Fields: ValidationErrors{"transaction_id": {
		"several " + string(typ) + "s match: give the id or the reference"}}}
}

// TimelineStep is one dated line of a transaction's timeline.
type TimelineStep struct {
	At time.Time
	// Kind is "created", "event", "ledger", "attempt", "refund", "split"
	// or "dispute".
	Kind   string
	Title  string
	Detail string
	// OK is false for a failed attempt.
	OK bool
}

// TransactionView is a transaction with everything that happened to it.
type TransactionView struct {
	Transaction *Transaction
	Merchant    *Merchant
	// Parent is the payment a refund gives back.
	Parent *Transaction
	// Events are the transaction's events, its refunds' and its disputes',
	// with their deliveries and attempts.
	Events   []*EventView
	Entries  []*ledger.Entry
	Refunds  []*Transaction
	Splits   []*SplitItem
	Disputes []*Dispute
	Steps    []TimelineStep
	// CanMarkRefunded: a successful payment whose provider has no
	// automatic refunds.
	CanMarkRefunded bool
	// CanSettle: an open payout or refund, which the operator may settle
	// by hand with the outcome its provider gave (SettleByHand).
	CanSettle bool
}

// TransactionView reads a transaction of any merchant and its history;
// not_found.
func (a *App) TransactionView(ctx context.Context, id string) (*TransactionView, error) {
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	a.decorate(t)
	v := &TransactionView{Transaction: t}
	if v.Merchant, err = a.Store.Merchant(ctx, t.MerchantID); err != nil {
		return nil, err
	}
	if t.ParentID != "" {
		if v.Parent, err = a.Store.Transaction(ctx, "", t.ParentID); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	objects := []string{t.ID}
	if t.Type == TypePayment {
		if v.Refunds, err = a.Store.ChildTransactions(ctx, t.ID); err != nil {
			return nil, fmt.Errorf("refunds: %w", err)
		}
		if v.Splits, err = a.Store.Splits(ctx, t.ID); err != nil {
			return nil, fmt.Errorf("splits: %w", err)
		}
		if v.Disputes, err = a.Store.DisputesOf(ctx, t.ID); err != nil {
			return nil, fmt.Errorf("disputes: %w", err)
		}
		for _, r := range v.Refunds {
			objects = append(objects, r.ID)
		}
		for _, d := range v.Disputes {
			objects = append(objects, d.ID)
		}
	}
	for _, obj := range objects {
		evs, err := a.Store.Events(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("events: %w", err)
		}
		for _, e := range evs {
			ev, err := a.eventDetail(ctx, e)
			if err != nil {
				return nil, err
			}
			v.Events = append(v.Events, ev)
		}
		es, err := a.Store.Entries(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("ledger entries: %w", err)
		}
		v.Entries = append(v.Entries, es...)
	}
	if spec, ok := a.Config.Providers[t.Provider]; ok && t.Type == TypePayment && t.Status == StatusSuccess && !spec.Refunds {
		v.CanMarkRefunded = true
	}
	v.CanSettle = (t.Type == TypePayout || t.Type == TypeRefund) && t.Status.Open()
	v.Steps = timeline(v)
	return v, nil
}

// timeline merges what happened to a transaction in time order.
func timeline(v *TransactionView) []TimelineStep {
	t := v.Transaction
	steps := []TimelineStep{{At: t.CreatedAt, Kind: "created", Title: string(StatusInitiated), OK: true,
		Detail: fmt.Sprintf("%s %s", t.Amount.Decimal(), t.Amount.Currency)}}
	if t.Route != "" {
		steps = append(steps, TimelineStep{At: t.CreatedAt, Kind: "route", Title: t.Provider + "/" + t.Route, Detail: t.RouteReason, OK: true})
	}
	for _, e := range v.Entries {
		var parts []string
		for _, p := range e.Postings {
			amt := Amount{Minor: p.Amount, Currency: Currency(p.Currency)}
			sign := "+"
			if p.Amount < 0 {
				sign, amt.Minor = "-", -p.Amount
			}
			parts = append(parts, fmt.Sprintf("%s %s%s %s", p.Account, sign, amt.Decimal(), p.Currency))
		}
		steps = append(steps, TimelineStep{At: e.CreatedAt, Kind: "ledger", Title: e.Kind, Detail: strings.Join(parts, "; "), OK: true})
	}
	for _, ev := range v.Events {
		steps = append(steps, TimelineStep{At: ev.Event.CreatedAt, Kind: "event", Title: ev.Event.Type, Detail: ev.Event.ID, OK: true})
		for _, d := range ev.Deliveries {
			for _, at := range d.Attempts {
				detail := d.Delivery.URL
				if at.HTTPStatus != 0 {
					detail += fmt.Sprintf(" → HTTP %d", at.HTTPStatus)
				}
				if at.ErrorMessage != "" {
					detail += " · " + at.ErrorMessage
				}
				ok := at.HTTPStatus >= 200 && at.HTTPStatus < 300 && at.ErrorMessage == ""
				steps = append(steps, TimelineStep{At: at.AttemptedAt, Kind: "attempt", Title: ev.Event.Type, Detail: detail, OK: ok})
			}
		}
	}
	for _, r := range v.Refunds {
		steps = append(steps, TimelineStep{At: r.CreatedAt, Kind: "refund", Title: r.Reference,
			Detail: fmt.Sprintf("%s %s · %s", r.Amount.Decimal(), r.Amount.Currency, r.Status), OK: r.Status != StatusFailed})
	}
	for _, s := range v.Splits {
		steps = append(steps, TimelineStep{At: s.CreatedAt, Kind: "split", Title: s.BeneficiaryID,
			Detail: fmt.Sprintf("%s %s", s.Amount.Decimal(), s.Amount.Currency), OK: true})
	}
	for _, d := range v.Disputes {
		steps = append(steps, TimelineStep{At: d.CreatedAt, Kind: "dispute", Title: d.Reference,
			Detail: fmt.Sprintf("%s %s · %s", d.Amount.Decimal(), d.Amount.Currency, d.Status), OK: d.Status != DisputeLost})
	}
	slices.SortStableFunc(steps, func(a, b TimelineStep) int { return a.At.Compare(b.At) })
	return steps
}

// OperatorRedeliver sends an event of any merchant again, as Redeliver
// does for the merchant, audited as the operator's action. It returns the
// event with its deliveries; not_found.
func (a *App) OperatorRedeliver(ctx context.Context, id string) (*EventView, error) {
	e, err := a.Store.EventByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := a.redeliver(ctx, e, true); err != nil {
		return nil, err
	}
	return a.eventDetail(ctx, e)
}
