package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Subscription events (named in docs/subscriptions.md).
const (
	EventSubscriptionCreated          = "subscription.created"
	EventSubscriptionPaymentRequested = "subscription.payment_requested"
	EventSubscriptionPaymentSucceeded = "subscription.payment_succeeded"
	EventSubscriptionPaymentFailed    = "subscription.payment_failed"
	EventSubscriptionCancelScheduled  = "subscription.cancel_scheduled"
	EventSubscriptionCancelled        = "subscription.cancelled"
	EventSubscriptionExpired          = "subscription.expired"
)

// Subscription retries, when the configuration sets none
// (subscription_max_attempts, subscription_retry_seconds): a period's
// payment that fails is asked again a day later, up to three payments a
// period; then the subscription expires.
const (
	DefaultSubscriptionMaxAttempts = 3
	DefaultSubscriptionRetryDelay  = 24 * time.Hour
)

// MarshalJSON renders the subscription record.
func (s *Subscription) MarshalJSON() ([]byte, error) {
	md := s.Metadata
	if md == nil {
		md = map[string]string{}
	}
	var next *string
	if s.Status == SubscriptionActive {
		next = tsPtr(&s.NextActionAt)
	}
	return json.Marshal(struct {
		ID                 string             `json:"id"`
		Object             string             `json:"object"`
		PlanID             string             `json:"plan_id"`
		CustomerID         string             `json:"customer_id"`
		Status             SubscriptionStatus `json:"status"`
		Provider           *string            `json:"provider"`
		CancelAtPeriodEnd  bool               `json:"cancel_at_period_end"`
		CurrentPeriodStart string             `json:"current_period_start"`
		CurrentPeriodEnd   string             `json:"current_period_end"`
		NextPaymentAt      *string            `json:"next_payment_at"`
		FailedAttempts     int                `json:"failed_attempts"`
		LatestPaymentID    *string            `json:"latest_payment_id"`
		CancelledAt        *string            `json:"cancelled_at"`
		Metadata           map[string]string  `json:"metadata"`
		Livemode           bool               `json:"livemode"`
		CreatedAt          string             `json:"created_at"`
		UpdatedAt          string             `json:"updated_at"`
	}{s.ID, "subscription", s.PlanID, s.CustomerID, s.Status, strPtr(s.Provider), s.CancelAtPeriodEnd,
		Timestamp(s.CurrentPeriodStart), Timestamp(s.CurrentPeriodEnd), next, s.FailedAttempts, strPtr(s.LatestPaymentID),
		tsPtr(s.CancelledAt), md, s.Mode.Live(), Timestamp(s.CreatedAt), Timestamp(s.UpdatedAt)})
}

// SubscriptionInput is the body of POST /v1/subscriptions.
type SubscriptionInput struct {
	PlanID     *string           `json:"plan_id"`
	CustomerID *string           `json:"customer_id"`
	Provider   *string           `json:"provider"`
	Metadata   map[string]string `json:"metadata"`
}

// periodEnd is the end of the k-th period (k ≥ 1) of plan p from anchor,
// the subscription's start. Months and years keep the anchor's day,
// clamped to a shorter month's last (a subscription from 31 October renews
// on 30 November, then 31 December), where time.AddDate rolled over into
// the next month (1 December) and the billing day moved for good.
func periodEnd(anchor time.Time, k int, p *Plan) time.Time {
	n := k * p.IntervalCount
	switch p.Interval {
	case IntervalDay:
		return anchor.AddDate(0, 0, n)
	case IntervalWeek:
		return anchor.AddDate(0, 0, 7*n)
	case IntervalYear:
		return addMonths(anchor, 12*n)
	}
	return addMonths(anchor, n)
}

// addMonths adds m months to t, keeping its day of the month or, in a
// shorter month, that month's last day.
func addMonths(t time.Time, m int) time.Time {
	y, mo, d := t.Date()
	first := time.Date(y, mo+time.Month(m), 1, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), t.Location())
	last := first.AddDate(0, 1, -1).Day()
	return first.AddDate(0, 0, min(d, last)-1)
}

// nextPeriodEnd is the first end of a period of p from anchor after end:
// where the period that ends at end is followed by the next.
func nextPeriodEnd(anchor, end time.Time, p *Plan) time.Time {
	// From an estimate that never passes it (periods counted at their
	// longest), a few steps at most.
	longest := 24 * time.Hour * time.Duration(p.IntervalCount)
	switch p.Interval {
	case IntervalWeek:
		longest *= 7
	case IntervalYear:
		longest *= 366
	case IntervalMonth:
		longest *= 31
	}
	k := 1
	if span := end.Sub(anchor); span > 0 && longest > 0 {
		k = max(1, int(span/longest))
	}
	for {
		if e := periodEnd(anchor, k, p); e.After(end) {
			return e
		}
		k++
	}
}

// termEnded reports whether the period that ends at s's current period
// end is the last of its plan's term. Periods follow one another from the
// subscription's start, each ending where periodEnd puts it, as the
// renewals compute them.
func termEnded(s *Subscription, p *Plan) bool {
	if p.TermCount <= 0 {
		return false
	}
	return !s.CurrentPeriodEnd.Before(periodEnd(s.CreatedAt, p.TermCount, p))
}

// CreateSubscription starts a subscription and asks for its first period's
// payment: tokenised mobile money does not exist yet, so each period the
// customer approves a payment (a push to the phone with a provider, or a
// hosted link without one, sent in subscription.payment_requested). It
// returns subscription_plan_not_available (plan_id), livemode_mismatch (the
// merchant's plan or customer of the other mode),
// subscription_customer_mismatch (customer_id), validation_error and
// merchant_inactive.
func (a *App) CreateSubscription(ctx context.Context, p *Principal, idemKey string, in SubscriptionInput) (*Subscription, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	// It moves the customer's money every period: a live one, as every
	// money-moving call, waits for the merchant's KYC.
	if p.Mode() == ModeLive && p.Merchant.KYC != KYCApproved {
		return nil, E(EMerchantKYCRequired)
	}
	v := ValidationErrors{}
	planID, customerID, provider := "", "", ""
	if in.PlanID == nil || strings.TrimSpace(*in.PlanID) == "" {
		v.Add("plan_id", "is required")
	} else {
		planID = strings.TrimSpace(*in.PlanID)
	}
	if in.CustomerID == nil || strings.TrimSpace(*in.CustomerID) == "" {
		v.Add("customer_id", "is required")
	} else {
		customerID = strings.TrimSpace(*in.CustomerID)
	}
	if in.Provider != nil && strings.TrimSpace(*in.Provider) != "" {
		if provider = strings.TrimSpace(*in.Provider); !ValidProvider(provider) {
			v.Add("provider", "must be channel_a, channel_b or channel_c")
		}
	}
	ValidateMetadata(v, in.Metadata)
	if err := v.Err(); err != nil {
		return nil, err
	}
	now := a.now()
	var s *Subscription
	var plan *Plan
	err := a.update(ctx, func(tx Tx) error {
		key := idemKey
		if key != "" {
			// The subscription commits before its first payment is asked
			// and the answer stored: a retry after a stopped process finds
			// the one it made, rather than subscribe the customer twice.
			old, err := tx.SubscriptionByCreationKey(ctx, p.Merchant.ID, p.Mode(), key)
			switch {
			case err == nil && old.PlanID == planID && old.CustomerID == customerID && old.Provider == provider:
				s = old
				return nil
			case err == nil && a.now().Before(old.CreatedAt.Add(IdempotencyTTL)):
				return E(EIdempotencyConflict)
			case err == nil:
				// The key past its day names another request, which the
				// old subscription keeps it from recording.
				key = ""
			case !errors.Is(err, ErrNotFound):
				return err
			}
		}
		var err error
		plan, err = tx.PlanByID(ctx, planID)
		// The merchant's own plan or customer of the other mode is a
		// mode mismatch, as every other reference across modes is.
		switch {
		case errors.Is(err, ErrNotFound) || err == nil && (plan.MerchantID != p.Merchant.ID || plan.Mode == p.Mode() && !plan.Active):
			return E(ESubscriptionPlanNotAvailable, "plan_id", planID)
		case err != nil:
			return err
		case plan.Mode != p.Mode():
			return E(ELivemodeMismatch)
		}
		c, err := tx.CustomerForUpdate(ctx, p.Merchant.ID, customerID)
		switch {
		case errors.Is(err, ErrNotFound):
			return E(ESubscriptionCustomerMismatch, "customer_id", customerID)
		case err != nil:
			return err
		case c.Mode != p.Mode():
			return E(ELivemodeMismatch)
		}
		s = &Subscription{ID: a.NewID(), MerchantID: p.Merchant.ID, Mode: p.Mode(), PlanID: plan.ID, CustomerID: c.ID,
			Status: SubscriptionActive, Provider: provider, CurrentPeriodStart: now, CurrentPeriodEnd: periodEnd(now, 1, plan),
			Metadata: in.Metadata, CreatedAt: now, UpdatedAt: now, CreationKey: key}
		s.NextActionAt = s.CurrentPeriodEnd
		if err := tx.InsertSubscription(ctx, s); err != nil {
			return fmt.Errorf("insert subscription: %w", err)
		}
		return a.subscriptionEvent(ctx, tx, s, EventSubscriptionCreated, nil)
	})
	if err != nil {
		return nil, err
	}
	if s.LatestPaymentID == "" {
		if err := a.requestPeriodPayment(ctx, s.MerchantID, s.ID); err != nil {
			return nil, err
		}
	}
	out, err := a.Store.Subscription(ctx, p.Merchant.ID, s.ID)
	if err != nil {
		return nil, err
	}
	return out, RunCommitHookStandalone(ctx, a, out)
}

// subscriptionEvent writes a subscription event; extra joins the record
// under "payment" (the period's payment, with its payment_url).
func (a *App) subscriptionEvent(ctx context.Context, tx Tx, s *Subscription, typ string, payment *Transaction) error {
	rec, err := s.MarshalJSON()
	if err != nil {
		return err
	}
	data := rec
	if payment != nil {
		var m map[string]json.RawMessage
		_ = json.Unmarshal(rec, &m)
		pj, err := json.Marshal(a.decorate(payment))
		if err != nil {
			return err
		}
		m["payment"] = pj
		if data, err = json.Marshal(m); err != nil {
			return err
		}
	}
	return a.emit(ctx, tx, &Event{ID: a.NewID(), MerchantID: s.MerchantID, Mode: s.Mode, Type: typ, ObjectType: "subscription",
		ObjectID: s.ID, Data: data, CreatedAt: a.now()}, "")
}

// requestPeriodPayment creates the payment of a subscription's current
// period and tells the merchant (subscription.payment_requested).
func (a *App) requestPeriodPayment(ctx context.Context, merchantID, id string) error {
	s, err := a.Store.Subscription(ctx, merchantID, id)
	if err != nil {
		return err
	}
	m, err := a.Store.Merchant(ctx, s.MerchantID)
	if err != nil {
		return err
	}
	plan, err := a.Store.Plan(ctx, s.MerchantID, s.PlanID)
	if err != nil {
		return err
	}
	c, err := a.Store.Customer(ctx, s.MerchantID, s.CustomerID)
	if err != nil {
		return err
	}
	units := fmt.Sprint(plan.Amount.Minor / 100)
	var n Number
	_ = n.UnmarshalJSON([]byte(units))
	ref := fmt.Sprintf("sub-%s-%s-%d", s.ID, s.CurrentPeriodStart.Format("20060102"), s.FailedAttempts+1)
	cur, phone := string(plan.Amount.Currency), c.Phone
	in := PaymentInput{MerchantRef: &ref, Amount: &n, Currency: &cur, PayerPhone: &phone,
		Metadata: map[string]any{"subscription_id": s.ID}, noReturn: true}
	if s.Provider != "" {
		in.Provider = &s.Provider
	}
	// The payment is made in the customer's country, with the customer's
	// name: without them a customer of Côte d'Ivoire was asked in the
	// merchant's Senegal, refused for a foreign number every period.
	if country := PhoneCountry(c.Phone); country != "" {
		cs := string(country)
		in.Country = &cs
	}
	if c.Name != "" {
		in.PayerName = &c.Name
	}
	principal := &Principal{Merchant: m, Key: &Key{Mode: s.Mode, Type: KeySecret, Scopes: AllScopes}}
	// Asked before by a process stopped before recording it: the same
	// payment, found by its merchant_ref, unless it is still to be sent to
	// its provider (CreatePayment resumes that one).
	var perr error
	pay := a.byMerchantRef(ctx, s.MerchantID, ref, func(x *Transaction) bool {
		return x.Type == TypePayment && x.Mode == s.Mode && x.Metadata["subscription_id"] == s.ID && !x.answerLost()
	})
	if pay != nil {
		pay = a.decorate(pay)
	} else {
		// The period's payment is the subscription's own: no request's
		// answer is stored with it.
		pay, perr = a.CreatePayment(WithCommitHook(ctx, nil), principal, "", in)
	}
	return a.update(ctx, func(tx Tx) error {
		if perr == nil {
			// The payment may have settled already, at its creation (a
			// provider that settles at once) or since, while the
			// subscription did not name it yet, so that
			// onSubscriptionPayment passed it by. Locked first, as its
			// transitions lock it before the subscription: a later
			// outcome waits for this commit and finds it named.
			p, err := tx.TransactionForUpdate(ctx, pay.ID)
			if err != nil {
				return err
			}
			pay = a.decorate(p)
		}
		cur, err := tx.SubscriptionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		cur.UpdatedAt = a.now()
		if perr != nil {
			// The payment could not even be asked: count it as a failed
			// attempt, retried later.
			return a.subscriptionPaymentFailed(ctx, tx, cur, nil)
		}
		if cur.LatestPaymentID == pay.ID {
			return nil // recorded already (another process)
		}
		cur.LatestPaymentID, cur.NextActionAt = pay.ID, cur.CurrentPeriodEnd
		if err := tx.UpdateSubscription(ctx, cur); err != nil {
			return err
		}
		// A payment that failed already (a refusal the provider answered at
		// once) is asked of no one: its subscription.payment_failed
		// follows, and a payment_requested before it carried a dead
		// payment for the merchant to forward to its customer.
		if pay.Status != StatusFailed && pay.Status != StatusCancelled && pay.Status != StatusExpired {
			if err := a.subscriptionEvent(ctx, tx, cur, EventSubscriptionPaymentRequested, pay); err != nil {
				return err
			}
		}
		if cur.Status != SubscriptionActive {
			return nil // cancelled meanwhile: its payment no longer moves it
		}
		return a.subscriptionOutcome(ctx, tx, cur, pay, pay.Status)
	})
}

// onSubscriptionPayment follows a period payment's outcome, inside the
// payment's transaction.
func (a *App) onSubscriptionPayment(ctx context.Context, tx Tx, t *Transaction, to Status) error {
	id := t.Metadata["subscription_id"]
	if id == "" || t.Type != TypePayment {
		return nil
	}
	s, err := tx.SubscriptionForUpdate(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// subscription_id is the merchant's own metadata key too: a
		// payment naming no subscription is no period's payment. Refused,
		// the payment could never settle, and it held the expiry and
		// reconciliation of every other payment behind it.
		return nil
	}
	if err != nil || s.Status != SubscriptionActive || s.LatestPaymentID != t.ID || s.MerchantID != t.MerchantID {
		return err
	}
	return a.subscriptionOutcome(ctx, tx, s, t, to)
}

// subscriptionOutcome moves an active subscription on after its period
// payment t reached to: paid, or a failed attempt. A payment still open
// changes nothing yet.
func (a *App) subscriptionOutcome(ctx context.Context, tx Tx, s *Subscription, t *Transaction, to Status) error {
	s.UpdatedAt = a.now()
	switch to {
	case StatusSuccess:
		s.FailedAttempts = 0
		s.NextActionAt = s.CurrentPeriodEnd
		if err := tx.UpdateSubscription(ctx, s); err != nil {
			return err
		}
		return a.subscriptionEvent(ctx, tx, s, EventSubscriptionPaymentSucceeded, t)
	case StatusFailed, StatusCancelled, StatusExpired:
		return a.subscriptionPaymentFailed(ctx, tx, s, t)
	}
	return nil
}

// subscriptionPaymentFailed counts a failed attempt of the period's
// payment t (nil: it could not even be asked): subscription.payment_failed,
// every time, then either a retry later or, at the last attempt,
// subscription.expired.
func (a *App) subscriptionPaymentFailed(ctx context.Context, tx Tx, s *Subscription, t *Transaction) error {
	s.FailedAttempts++
	s.NextActionAt = a.now().Add(a.Config.SubscriptionRetryDelay())
	// The failed attempt is told with the subscription still active; the
	// row is written once, expired at the last attempt.
	if err := a.subscriptionEvent(ctx, tx, s, EventSubscriptionPaymentFailed, t); err != nil {
		return err
	}
	last := s.FailedAttempts >= a.Config.SubscriptionAttempts()
	if last {
		s.Status = SubscriptionExpired
	}
	if err := tx.UpdateSubscription(ctx, s); err != nil {
		return err
	}
	if !last {
		return nil
	}
	return a.subscriptionEvent(ctx, tx, s, EventSubscriptionExpired, nil)
}

// periodAskAgain is how soon a subscription whose period payment is being
// asked is due again, should the asking process stop before recording it:
// past any provider call (45 s at most, failovers included).
const periodAskAgain = 2 * time.Minute

// RenewDue moves due subscriptions on: a period that ended starts the next
// one (or ends the subscription when cancel_at_period_end), and a failed
// period payment is asked again. It returns how many it handled.
func (a *App) RenewDue(ctx context.Context, limit int) (int, error) {
	now := a.now()
	due, err := a.Store.DueSubscriptions(ctx, now, limit)
	if err != nil {
		return 0, fmt.Errorf("due subscriptions: %w", err)
	}
	var errs []error
	n := 0
	for _, d := range due {
		ask := false
		err := a.update(ctx, func(tx Tx) error {
			s, err := tx.SubscriptionForUpdate(ctx, d.ID)
			if err != nil || s.Status != SubscriptionActive || s.NextActionAt.After(now) {
				return err
			}
			s.UpdatedAt = now
			if !now.Before(s.CurrentPeriodEnd) {
				if s.CancelAtPeriodEnd {
					s.Status, s.CancelledAt = SubscriptionCancelled, &now
					if err := tx.UpdateSubscription(ctx, s); err != nil {
						return err
					}
					return a.subscriptionEvent(ctx, tx, s, EventSubscriptionCancelled, nil)
				}
				plan, err := tx.PlanByID(ctx, s.PlanID)
				if err != nil {
					return err
				}
				if termEnded(s, plan) {
					s.Status = SubscriptionExpired
					if err := tx.UpdateSubscription(ctx, s); err != nil {
						return err
					}
					return a.subscriptionEvent(ctx, tx, s, EventSubscriptionExpired, nil)
				}
				// A period left unpaid keeps its failed attempts: they count
				// on until a payment succeeds (which sets them to 0), so that a
				// plan whose retry comes after its period's end (a daily plan,
				// retried a day later) still expires a customer who never pays.
				s.CurrentPeriodStart, s.CurrentPeriodEnd = s.CurrentPeriodEnd, nextPeriodEnd(s.CreatedAt, s.CurrentPeriodEnd, plan)
			}
			// Due again soon, not at the period's end: a process stopped
			// before the payment below is recorded leaves the subscription
			// asked again (the same merchant_ref: the same payment), not a
			// month later. Recording it sets the period's end.
			s.NextActionAt = now.Add(periodAskAgain)
			ask = true
			return tx.UpdateSubscription(ctx, s)
		})
		if err == nil && ask {
			err = a.requestPeriodPayment(ctx, d.MerchantID, d.ID)
		}
		if err != nil {
			// One subscription that cannot move does not hold the others.
			if errs = append(errs, fmt.Errorf("renew subscription %s: %w", d.ID, err)); ctx.Err() != nil {
				break
			}
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// CancelSubscription ends a subscription at once, or at the end of the
// current period (atPeriodEnd). It returns subscription_already_in_status
// (status) for a cancelled or expired one, not_found, livemode_mismatch.
func (a *App) CancelSubscription(ctx context.Context, p *Principal, id string, atPeriodEnd bool) (*Subscription, error) {
	var out *Subscription
	err := a.update(ctx, func(tx Tx) error {
		s, err := tx.SubscriptionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if s.MerchantID != p.Merchant.ID {
			return ErrNotFound
		}
		if s.Mode != p.Mode() {
			return E(ELivemodeMismatch)
		}
		if s.Status == SubscriptionCancelled || s.Status == SubscriptionExpired {
			return E(ESubscriptionAlreadyInStatus, "status", string(s.Status))
		}
		now := a.now()
		if atPeriodEnd {
			// Scheduled again, it is answered as it is: nothing changed.
			if !s.CancelAtPeriodEnd {
				s.CancelAtPeriodEnd, s.UpdatedAt = true, now
				if err := tx.UpdateSubscription(ctx, s); err != nil {
					return err
				}
				if err := a.subscriptionEvent(ctx, tx, s, EventSubscriptionCancelScheduled, nil); err != nil {
					return err
				}
			}
		} else {
			s.Status, s.CancelledAt, s.UpdatedAt = SubscriptionCancelled, &now, now
			if err := tx.UpdateSubscription(ctx, s); err != nil {
				return err
			}
			if err := a.subscriptionEvent(ctx, tx, s, EventSubscriptionCancelled, nil); err != nil {
				return err
			}
		}
		out = s
		return RunCommitHook(ctx, tx, s)
	})
	return out, err
}

// Subscription returns one of the merchant's subscriptions.
func (a *App) Subscription(ctx context.Context, p *Principal, id string) (*Subscription, error) {
	s, err := a.Store.Subscription(ctx, p.Merchant.ID, id)
	if err != nil {
		return nil, err
	}
	if s.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return s, nil
}

// Subscriptions lists the merchant's subscriptions in the key's mode.
func (a *App) Subscriptions(ctx context.Context, p *Principal, status SubscriptionStatus, page PageRequest) ([]*Subscription, Pagination, error) {
	list, total, err := a.Store.Subscriptions(ctx, p.Merchant.ID, p.Mode(), status, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list subscriptions: %w", err)
	}
	return list, NewPagination(page, total), nil
}

// Customers lists the merchant's customers in the key's mode.
func (a *App) Customers(ctx context.Context, p *Principal, page PageRequest) ([]*Customer, Pagination, error) {
	list, total, err := a.Store.Customers(ctx, CustomerFilter{MerchantID: p.Merchant.ID, Mode: p.Mode()}, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list customers: %w", err)
	}
	return list, NewPagination(page, total), nil
}

// Customer returns one of the merchant's customers; not_found or
// livemode_mismatch.
func (a *App) Customer(ctx context.Context, p *Principal, id string) (*Customer, error) {
	c, err := a.Store.Customer(ctx, p.Merchant.ID, id)
	if err != nil {
		return nil, err
	}
	if c.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return c, nil
}
