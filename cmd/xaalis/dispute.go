package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// cmdDisputeOpen opens a dispute as the operator.
func cmdDisputeOpen(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("dispute open", stderr)
	db := databaseFlag(fs, getenv)
	tx := fs.String("transaction", "", "payment ID (required)")
	amount := fs.Int64("amount", 0, "disputed amount in whole units (default: all that was not refunded)")
	reason := fs.String("reason", "", "why the payer disputes it")
	configPath := fs.String("config", getenv("XAALIS_CONFIG"), "business configuration file, serve's (its dispute_response_seconds sets due_by); empty: the embedded defaults (env XAALIS_CONFIG)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *tx == "" {
		return usagef("dispute open: --transaction is required")
	}
	if setFlags(fs)["amount"] && *amount <= 0 {
		// 0 is the flag's default (all that was not refunded), not an
		// amount one can ask for.
		return usagef("dispute open: --amount must be positive")
	}
	if *amount > xaalis.MaxWholeUnits {
		// Its minor units would overflow into another, smaller amount.
		return usagef("dispute open: --amount is too large")
	}
	business, err := xaalis.LoadConfig(*configPath)
	if err != nil {
		return err
	}
	return withEventsApp(ctx, *db, getenv, func(app *xaalis.App) error {
		app.Config = business
		d, err := app.OpenDispute(ctx, xaalis.DisputeOpen{TransactionID: *tx, Amount: *amount * 100, Reason: *reason})
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("payment %s not found", *tx)
		} else if err != nil {
			return describe(err, "reason")
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(d)
		}
		fmt.Fprintf(stdout, "dispute %s (%s) opened: %s, due by %s\n", d.ID, d.Reference, d.Status, xaalis.Timestamp(d.DueBy))
		return nil
	})
}

// cmdDisputeDecide closes a dispute as won or lost.
func cmdDisputeDecide(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("dispute decide", stderr)
	db := databaseFlag(fs, getenv)
	outcome := fs.String("outcome", "", "won or lost (required)")
	note := fs.String("note", "", "why, kept in the audit log")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) != 1 || *outcome == "" {
		return usagef("dispute decide: expected one dispute ID and --outcome won|lost")
	}
	return withEventsApp(ctx, *db, getenv, func(app *xaalis.App) error {
		d, err := app.DecideDispute(ctx, pos[0], xaalis.DisputeStatus(*outcome), *note)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("dispute %s not found", pos[0])
		} else if err != nil {
			return describe(err, "outcome", "note")
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(d)
		}
		fmt.Fprintf(stdout, "dispute %s is %s\n", d.ID, d.Status)
		return nil
	})
}
