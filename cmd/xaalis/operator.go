package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// withApp opens the database a command names and runs fn with an App on it.
func withApp(ctx context.Context, db string, fn func(*xaalis.App) error) error {
	s, err := openStore(ctx, db)
	if err != nil {
		return err
	}
	defer s.Close()
	return fn(xaalis.NewApp(s))
}

// cmdOperatorTokenCreate makes a token for the admin API.
func cmdOperatorTokenCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("operator token create", stderr)
	db := databaseFlag(fs, getenv)
	name := fs.String("name", "", "who or what the token is for (required)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parseInterspersed(fs, args); err != nil {
		return usageError{err.Error()}
	}
	if *name == "" {
		return usagef("operator token create: --name is required")
	}
	return withApp(ctx, *db, func(app *xaalis.App) error {
		t, secret, err := app.CreateOperatorToken(ctx, *name)
		if err != nil {
			return describe(err)
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(map[string]string{"id": t.ID, "name": t.Name, "token": secret,
				"created_at": xaalis.Timestamp(t.CreatedAt)})
		}
		fmt.Fprintf(stdout, "operator token %s created; it is shown once:\n  %s\n", t.ID, secret)
		return nil
	})
}

// cmdPayoutRequest applies an operator's move to a payout request.
func cmdPayoutRequest(ctx context.Context, action string, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("payout-request "+action, stderr)
	db := databaseFlag(fs, getenv)
	reason := fs.String("reason", "", "why (required to reject; recorded on failure)")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageError{err.Error()}
	}
	if len(pos) != 1 {
		return usagef("payout-request %s: expected one payout request ID", action)
	}
	return withApp(ctx, *db, func(app *xaalis.App) error {
		pr, err := app.MovePayoutRequest(ctx, pos[0], xaalis.PayoutRequestAction(action), *reason)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("payout request %s not found", pos[0])
		} else if err != nil {
			var e *xaalis.Error
			if errors.As(err, &e) && e.Message != "" {
				return errors.New(e.Message)
			}
			return describe(err)
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(pr)
		}
		fmt.Fprintf(stdout, "payout request %s (%s) is %s\n", pr.ID, pr.Reference, pr.Status)
		return nil
	})
}

// cmdLedgerCheck compares every balance with its postings; it fails when
// anything differs.
func cmdLedgerCheck(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("ledger check", stderr)
	db := databaseFlag(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	return withApp(ctx, *db, func(app *xaalis.App) error {
		ps, err := app.LedgerCheck(ctx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			fmt.Fprintln(stdout, p.String())
		}
		if len(ps) > 0 {
			return fmt.Errorf("ledger check: %d problems", len(ps))
		}
		fmt.Fprintln(stdout, "ledger consistent: every entry sums to zero and every balance equals its postings")
		return nil
	})
}

// cmdPaymentMarkRefunded is the operator's fallback for providers without
// automatic refunds.
func cmdPaymentMarkRefunded(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("payment mark-refunded", stderr)
	db := databaseFlag(fs, getenv)
	note := fs.String("note", "", "what was done (the payout that paid the payer back)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usageError{err.Error()}
	}
	if len(pos) != 1 {
		return usagef("payment mark-refunded: expected one payment ID")
	}
	return withApp(ctx, *db, func(app *xaalis.App) error {
		t, err := app.MarkRefunded(ctx, pos[0], *note)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("payment %s not found", pos[0])
		} else if err != nil {
			return describe(err)
		}
		fmt.Fprintf(stdout, "payment %s (%s) is %s\n", t.ID, t.Reference, t.Status)
		return nil
	})
}
