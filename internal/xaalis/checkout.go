package xaalis

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	v := &CheckoutView{Payment: t, Merchant: m, TestMode: t.Mode == ModeTest}
	if t.Status == StatusInitiated && t.ProviderRef == "" {
		// Only providers that can take this payment now: on, serving the
		// country, allowed, priced, above their floor, and reachable.
		for _, info := range a.ProvidersFor(&Principal{Merchant: m, Key: &Key{Mode: t.Mode}}, t.Country) {
			probe := *t
			if !info.Payments || !info.Allowed || !info.Healthy || a.checkProvider(ctx, m, &probe, info.ID) != nil {
				continue
			}
			v.Providers = append(v.Providers, info)
		}
	}
	return v, nil
}

// CheckoutPayment returns the payment behind a payment URL, without the
// page's provider list (the status poll needs no more); not_found for
// anything that is not a payment.
func (a *App) CheckoutPayment(ctx context.Context, id string) (*Transaction, error) {
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if t.Type != TypePayment {
		return nil, ErrNotFound
	}
	return a.decorate(t), nil
}

// ChooseProvider records the payer's choice on the hosted page, with the
// payer's phone when the merchant did not give it, and initiates the
// payment. It returns the errors of CreatePayment's provider and payer
// checks, and validation_error when the payment is no longer waiting for
// a choice.
func (a *App) ChooseProvider(ctx context.Context, id, provider, phone string) (*Transaction, error) {
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if t.Type != TypePayment || t.Status != StatusInitiated || t.ProviderRef != "" {
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
	if phone = strings.TrimSpace(phone); phone == "" {
		phone = t.PayerPhone
	}
	if phone == "" {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"phone": {"is required"}}}
	}
	if phone, err = ParsePhone(phone, t.Country); err != nil {
		return nil, err
	}
	if err := a.checkProvider(ctx, m, t, provider); err != nil {
		return nil, err
	}
	probe := *t
	probe.PayerPhone = phone
	if err := a.checkPayerCeiling(ctx, &probe); err != nil {
		return nil, err
	}
	err = a.Store.Update(ctx, func(tx Tx) error {
		cur, err := tx.TransactionForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if cur.Status != StatusInitiated || cur.ProviderRef != "" {
			return &Error{Code: EValidation, Fields: ValidationErrors{"provider": {"the payment is no longer waiting for a provider"}}}
		}
		now := a.now()
		c, err := tx.UpsertCustomer(ctx, &Customer{ID: a.NewID(), MerchantID: cur.MerchantID, Mode: cur.Mode,
			Phone: phone, Name: cur.PayerName, CreatedAt: now, UpdatedAt: now})
		if err != nil {
			return fmt.Errorf("upsert customer: %w", err)
		}
		cur.Provider, cur.PayerPhone, cur.CustomerID, cur.UpdatedAt = provider, phone, c.ID, now
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
	t, err := a.Store.Transaction(ctx, "", id)
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
	t, err := a.Store.Transaction(ctx, "", id)
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
	t, err := a.Store.Transaction(ctx, "", id)
	if err != nil {
		return nil, err
	}
	if !t.Status.Open() {
		return a.decorate(t), nil
	}
	if t.ProviderRef != "" && t.Mode == ModeTest {
		// The simulated provider hears of it too, as a real one would.
		if err := a.Gateway.PayerAction(ctx, t.Provider, t.ProviderRef, ProviderCancelled); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
	}
	return a.cancel(ctx, id, "cancelled by the payer")
}
