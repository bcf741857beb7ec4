package xaalis

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxPlanTermCount bounds a plan's term, in billing periods.
const MaxPlanTermCount = 1000

// CreatePlan creates a plan in the key's mode. It returns
// merchant_inactive, amount_must_be_positive or validation_error.
func (a *App) CreatePlan(ctx context.Context, p *Principal, in PlanInput) (*Plan, error) {
	if err := p.Merchant.ActiveError(); err != nil {
		return nil, err
	}
	v := ValidationErrors{}
	name := ""
	if in.Name == nil || strings.TrimSpace(*in.Name) == "" {
		v.Add("name", "is required")
	} else if name = strings.TrimSpace(*in.Name); utf8.RuneCountInString(name) > 200 {
		v.Add("name", "must be at most 200 characters")
	}
	cur := XOF
	if in.Currency != nil {
		cur = Currency(strings.ToUpper(*in.Currency))
		if !cur.Valid() {
			v.Add("currency", "must be one of XOF, EUR, USD")
		}
	}
	amount, amountErr := WholeUnits(v, "amount", in.Amount, cur)
	var interval Interval
	if in.Interval == nil {
		v.Add("interval", "is required")
	} else if interval = Interval(*in.Interval); !interval.Valid() {
		v.Add("interval", "must be day, week, month or year")
	}
	count := 1
	if in.IntervalCount != nil {
		if count = *in.IntervalCount; count < 1 || count > 365 {
			v.Add("interval_count", "must be between 1 and 365")
		}
	}
	term := 0
	if in.TermCount != nil {
		if term = *in.TermCount; term < 1 || term > MaxPlanTermCount {
			v.Add("term_count", fmt.Sprintf("must be between 1 and %d billing periods, or absent for no term", MaxPlanTermCount))
		}
	}
	ValidateMetadata(v, in.Metadata)
	if err := v.Err(); err != nil {
		return nil, err // before amount_must_be_positive
	}
	if amountErr != nil {
		return nil, amountErr
	}
	now := a.now()
	plan := &Plan{
		ID: a.NewID(), MerchantID: p.Merchant.ID, Mode: p.Mode(), Name: name, Amount: amount,
		Interval: interval, IntervalCount: count, TermCount: term, Active: true, Metadata: in.Metadata, CreatedAt: now, UpdatedAt: now,
	}
	err := a.update(ctx, func(tx Tx) error {
		if err := tx.CreatePlan(ctx, plan); err != nil {
			return fmt.Errorf("insert plan: %w", err)
		}
		return RunCommitHook(ctx, tx, plan)
	})
	if err != nil {
		return nil, err
	}
	return plan, nil
}

// Plan returns one of the merchant's plans. It returns not_found, or
// livemode_mismatch when the plan belongs to the other mode.
func (a *App) Plan(ctx context.Context, p *Principal, id string) (*Plan, error) {
	plan, err := a.Store.Plan(ctx, p.Merchant.ID, id)
	if err != nil {
		return nil, err
	}
	if plan.Mode != p.Mode() {
		return nil, E(ELivemodeMismatch)
	}
	return plan, nil
}

// Plans lists the merchant's plans in the key's mode, newest first.
func (a *App) Plans(ctx context.Context, p *Principal, active *bool, page PageRequest) ([]*Plan, Pagination, error) {
	plans, total, err := a.Store.Plans(ctx, PlanFilter{MerchantID: p.Merchant.ID, Mode: p.Mode(), Active: active}, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list plans: %w", err)
	}
	return plans, NewPagination(page, total), nil
}

// DeactivatePlan stops a plan from taking new subscriptions; deactivating
// an inactive plan changes nothing. It returns not_found or
// livemode_mismatch.
func (a *App) DeactivatePlan(ctx context.Context, p *Principal, id string) (*Plan, error) {
	var out *Plan
	err := a.update(ctx, func(tx Tx) error {
		plan, err := tx.PlanForUpdate(ctx, p.Merchant.ID, id)
		if err != nil {
			return err
		}
		if plan.Mode != p.Mode() {
			return E(ELivemodeMismatch)
		}
		if plan.Active {
			plan.Active = false
			plan.UpdatedAt = a.now()
			if err := tx.UpdatePlan(ctx, plan); err != nil {
				return fmt.Errorf("update plan: %w", err)
			}
		}
		out = plan
		return RunCommitHook(ctx, tx, plan)
	})
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	return out, err
}
