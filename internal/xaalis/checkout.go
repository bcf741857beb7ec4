package xaalis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// CheckoutView is what the hosted payment page shows: the payment, its
// merchant, and the providers that can take it now.
type CheckoutView struct {
	Payment   *Transaction
	Merchant  *Merchant
	Providers []ProviderInfo
	// TestMode: the page shows the simulate buttons.
	TestMode bool
}

// Checkout loads the hosted page of a payment. The payment URL is the
// payer's only credential: it returns not_found for anything else.
func (a *App) Checkout(ctx context.Context, id string) (*CheckoutView, error) {
	t, err := a.CheckoutPayment(ctx, id)
	if err != nil {
		return nil, err
	}
	m, err := a.Store.Merchant(ctx, t.MerchantID)
	if err != nil {
		return nil, fmt.Errorf("checkout merchant: %w", err)
	}
	guardReturnURLs(t, m)
	v := &CheckoutView{Payment: t, Merchant: m, TestMode: t.Mode == ModeTest}
	// A merchant that is not active takes no payment (the precheck answers
	// merchant_inactive): the page offers no provider.
	if t.Status == StatusInitiated && t.ProviderRef == "" && m.ActiveError() == nil {
		// Only the providers that can take this payment now, as the
		// precheck answers it: creation's checks, then route health.
		infos, verdicts, _, err := a.paymentChoices(ctx, m, t)
		if err != nil {
			return nil, fmt.Errorf("checkout providers: %w", err)
		}
		for i, verdict := range verdicts {
			if len(verdict.errs) == 0 && (!t.sentUnanswered() || infos[i].ID == t.Provider) {
				v.Providers = append(v.Providers, infos[i])
			}
		}
	}
	return v, nil
}

// sentUnanswered reports whether t was sent to its provider and its
// answer lost (503 gateway_unavailable: a timeout may have reached the
// provider), or never recorded (FailureReason empty: the request is on
// its way, or its process stopped before the answer), so that only that
// provider may be asked again.
func (t *Transaction) sentUnanswered() bool {
	return t.answerLost() && (t.FailureReason == string(EGatewayUnavailable) || t.FailureReason == "")
}

// ChoiceInFlight is how long after a provider is chosen for a payment
// (on the hosted page, or at creation) another choice is refused while
// that provider has not answered: longer than a provider call with its
// failovers. Two choices at once would otherwise start two collections.
// Past it (its process stopped before the answer), the payment may be
// sent again to the same provider only.
const ChoiceInFlight = 2 * time.Minute

// pagePayment reads the payment a hosted page's action names: not_found
// for anything that is not a payment, as the page itself answers.
func (a *App) pagePayment(ctx context.Context, id string) (*Transaction, error) {
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if t.Type != TypePayment {
		return nil, ErrNotFound
	}
	return t, nil
}

// CheckoutPayment returns the payment behind a payment URL, without the
// page's provider list (the status poll needs no more); not_found for
// anything that is not a payment.
func (a *App) CheckoutPayment(ctx context.Context, id string) (*Transaction, error) {
	t, err := a.pagePayment(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Publishable() {
		m, err := a.Store.Merchant(ctx, t.MerchantID)
		if err != nil {
			return nil, fmt.Errorf("checkout merchant: %w", err)
		}
		guardReturnURLs(t, m)
	}
	return a.decorate(t), nil
}

// guardReturnURLs drops the return URLs of a payment made with a
// publishable key that are not on the merchant's return hosts (they were
// checked at creation; the hosts may have changed since), so the hosted
// page never sends a payer to an address the merchant did not register.
func guardReturnURLs(t *Transaction, m *Merchant) {
	if !t.Publishable() {
		return
	}
	if !m.ReturnHostAllowed(t.SuccessURL) {
		t.SuccessURL = ""
	}
	if !m.ReturnHostAllowed(t.FailedURL) {
		t.FailedURL = ""
	}
}

// ChooseProvider records the payer's choice on the hosted page, with the
// payer's phone when the merchant did not give it, and initiates the
// payment. It returns the refusals of CreatePayment's limits (the ones
// that hide a provider from the page), and validation_error when the
// payment is no longer waiting for a choice.
func (a *App) ChooseProvider(ctx context.Context, id, provider, phone string) (*Transaction, error) {
	t, err := a.pagePayment(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status != StatusInitiated || t.ProviderRef != "" {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"provider": {
			fmt.Sprintf("the payment is %s: a provider can no longer be chosen", t.Status)}}}
	}
	m, err := a.Store.Merchant(ctx, t.MerchantID)
	if err != nil {
		return nil, err
	}
	if err := m.ActiveError(); err != nil {
		return nil, err
	}
	provider = strings.TrimSpace(provider)
	if provider == "" {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"provider": {"is required"}}}
	}
	if t.sentUnanswered() && provider != t.Provider {
		// Its provider may have it already (its answer was lost): another
		// would collect the payer a second time.
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"provider": {
			fmt.Sprintf("the payment was sent to %s, whose answer was lost: it can only be tried there again", t.Provider)}}}
	}
	if phone = strings.TrimSpace(phone); phone == "" {
		phone = t.PayerPhone
	}
	if phone == "" {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"phone": {"is required"}}}
	}
	if phone, err = ParsePhone(phone, t.Country); err != nil {
		return nil, err
	}
	probe := *t
	probe.PayerPhone = phone
	if err := a.checkAlone(ctx, m, &probe, provider); err != nil {
		return nil, err
	}
	ctx, release := a.reserveLimits(ctx, &probe, provider)
	defer release()
	if err := a.checkCreation(ctx, m, &probe, provider); err != nil {
		return nil, err
	}
	err = a.update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if cur.Status != StatusInitiated || cur.ProviderRef != "" {
			return &Error{Code: EValidation, Fields: ValidationErrors{"provider": {"the payment is no longer waiting for a provider"}}}
		}
		// A payment past its expires_at starts no collection: the expiry,
		// which runs every few seconds, ends it.
		if !a.now().Before(cur.ExpiresAt) {
			return &Error{Code: EValidation, Fields: ValidationErrors{"provider": {"the payment has expired: a provider can no longer be chosen"}}}
		}
		// Read again under the row's lock: a choice made meanwhile (two
		// posts at once) is on its way to its provider.
		if cur.answerLost() && cur.FailureReason == "" && a.now().Sub(cur.UpdatedAt) < ChoiceInFlight {
			return &Error{Code: EValidation, Fields: ValidationErrors{"provider": {
				fmt.Sprintf("the payment is being sent to %s: it is no longer waiting for a provider", cur.Provider)}}}
		}
		if cur.sentUnanswered() && provider != cur.Provider {
			return &Error{Code: EValidation, Fields: ValidationErrors{"provider": {
				fmt.Sprintf("the payment was sent to %s, whose answer was lost: it can only be tried there again", cur.Provider)}}}
		}
		if err := a.countPayerPhone(ctx, tx, cur, phone); err != nil {
			return err
		}
		now := a.now()
		c, err := tx.UpsertCustomer(ctx, &Customer{ID: a.NewID(), MerchantID: cur.MerchantID, Mode: cur.Mode,
			Phone: phone, Name: cur.PayerName, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			return fmt.Errorf("upsert customer: %w", err)
		}
		// An earlier choice's refusal is no longer the last word: with it
		// cleared, the payment reads as on its way to its provider, and
		// another choice meanwhile is refused (above). Left, it let two
		// posts after a refusal start two collections.
		cur.Provider, cur.PayerPhone, cur.CustomerID, cur.UpdatedAt = provider, phone, c.ID, now
		cur.FailureReason = ""
		return tx.UpdateTransaction(ctx, cur)
	})
	if err != nil {
		return nil, err
	}
	return a.initiate(ctx, id)
}

// SubmitOTP forwards the payer's one-time code (next_action otp) and
// applies the provider's answer. It returns validation_error when the
// payment awaits no code.
func (a *App) SubmitOTP(ctx context.Context, id, otp string) (*Transaction, error) {
	t, err := a.pagePayment(ctx, id)
	if err != nil {
		return nil, err
	}
	otp = strings.TrimSpace(otp)
	if t.Status != StatusPending || t.NextAction == nil || t.NextAction.Type != NextOTP {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"otp": {"the payment does not wait for a code"}}}
	}
	if otp == "" || len(otp) > 12 {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"otp": {"is required"}}}
	}
	// The provider hears only of a payment a power cut cannot undo.
	if err := a.Store.Durable(ctx); err != nil {
		return nil, err
	}
	st, err := a.Gateway.SubmitOTP(ctx, t.Mode, t.Provider, t.Route, t.ProviderRef, otp)
	if err != nil {
		return nil, err
	}
	out, err := a.finish(ctx, id, &st)
	if err == nil && st.State == ProviderPending && st.Reason != "" {
		return out, &Error{Code: EValidation, Fields: ValidationErrors{"otp": {"the code was refused; try again"}}}
	}
	return out, err
}

// CheckoutSimulate is the hosted page's test buttons: test payments only.
func (a *App) CheckoutSimulate(ctx context.Context, id, outcome string) (*Transaction, error) {
	t, err := a.pagePayment(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Mode != ModeTest {
		return nil, E(ELivemodeMismatch)
	}
	return a.simulate(ctx, t, outcome)
}

// CheckoutCancel is the payer abandoning the payment on the hosted page.
func (a *App) CheckoutCancel(ctx context.Context, id string) (*Transaction, error) {
	t, err := a.pagePayment(ctx, id)
	if err != nil {
		return nil, err
	}
	if !t.Status.Open() {
		return a.decorate(t), nil
	}
	if t.ProviderRef != "" && t.Mode == ModeTest {
		// The simulated provider hears of it too, as a real one would.
		if err := a.Store.Durable(ctx); err != nil {
			return nil, err
		}
		if err := a.Gateway.PayerAction(ctx, t.Provider, t.ProviderRef, ProviderCancelled); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return a.cancel(ctx, id, ReasonPayerCancelled)
}
