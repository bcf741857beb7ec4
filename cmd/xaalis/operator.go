package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// cmdOperatorTokenCreate makes a token for the admin API.
func cmdOperatorTokenCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("operator token create", stderr)
	db := databaseFlag(fs, getenv)
	name := fs.String("name", "", "who or what the token is for, shown in the audit log (default: $USER, else \"operator\")")
	expiresIn := fs.Duration("expires-in", 0, "the token ends after this long (720h); default: never")
	expiresAt := fs.String("expires-at", "", "the token ends at this time, RFC 3339; default: never")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		// The guides and the README make a token with the bare command: the
		// audit log then names who ran it.
		if *name = getenv("USER"); *name == "" {
			*name = "operator"
		}
	}
	var expiry *time.Time
	switch {
	case *expiresIn != 0 && *expiresAt != "":
		return usagef("operator token create: give --expires-in or --expires-at, not both")
	case *expiresIn < 0 || (*expiresIn == 0 && setFlags(fs)["expires-in"]):
		// 0 is the flag's default (never), not a lifetime one can ask for.
		return usagef("--expires-in: must be positive")
	case *expiresIn > 0:
		t := time.Now().UTC().Add(*expiresIn)
		expiry = &t
	case *expiresAt != "":
		t, err := time.Parse(time.RFC3339, *expiresAt)
		if err != nil {
			return usagef("--expires-at: expected RFC 3339, such as 2027-01-31T00:00:00Z")
		}
		t = t.UTC()
		expiry = &t
	}
	return withApp(ctx, *db, getenv, func(app *xaalis.App) error {
		t, secret, err := app.CreateOperatorToken(ctx, *name, expiry)
		if err != nil {
			return describe(err, "name", "expires_at")
		}
		if *asJSON {
			out := operatorTokenJSON(t)
			out["token"] = secret
			return json.NewEncoder(stdout).Encode(out)
		}
		fmt.Fprintf(stdout, "operator token %s created; it is shown once:\n  %s\n", t.ID, secret)
		return nil
	})
}

// operatorTokenJSON is how the CLI shows an operator token: never its hash.
func operatorTokenJSON(t *xaalis.OperatorToken) map[string]any {
	var out map[string]any
	b, _ := json.Marshal(t)
	_ = json.Unmarshal(b, &out)
	return out
}

// cmdOperatorTokenList lists the operator tokens, newest first.
func cmdOperatorTokenList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("operator token list", stderr)
	db := databaseFlag(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args, fs.Arg(0))
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		list, err := app.OperatorTokens(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			out := make([]map[string]any, 0, len(list))
			for _, t := range list {
				out = append(out, operatorTokenJSON(t))
			}
			return json.NewEncoder(stdout).Encode(out)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tCREATED\tEXPIRES")
		now := time.Now()
		for _, t := range list {
			status := "active"
			switch {
			case t.RevokedAt != nil:
				status = "revoked"
			case !t.Usable(now):
				status = "expired"
			}
			expires := "never"
			if t.ExpiresAt != nil {
				expires = xaalis.Timestamp(*t.ExpiresAt)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, status, xaalis.Timestamp(t.CreatedAt), expires)
		}
		return tw.Flush()
	})
}

// cmdOperatorTokenRevoke ends an operator token at once.
func cmdOperatorTokenRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("operator token revoke", stderr)
	db := databaseFlag(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) != 1 {
		return usagef("operator token revoke: expected one token ID")
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		t, err := app.RevokeOperatorToken(ctx, pos[0])
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("operator token %s not found", pos[0])
		} else if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(operatorTokenJSON(t))
		}
		fmt.Fprintf(stdout, "operator token %s (%s) revoked\n", t.ID, t.Name)
		return nil
	})
}

// cmdAuditList prints the audit log of operator actions, newest first.
func cmdAuditList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("audit list", stderr)
	db := databaseFlag(fs, getenv)
	limit := fs.Int("limit", 50, "how many entries, newest first (at most 100)")
	page := fs.Int("page", 1, "page of --limit entries")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > xaalis.MaxPerPage || *page < 1 || *page > xaalis.MaxPage {
		return usagef("audit list: --limit must be 1 to %d and --page 1 to %d", xaalis.MaxPerPage, xaalis.MaxPage)
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		list, _, err := app.AuditLog(ctx, xaalis.PageRequest{Page: *page, PerPage: *limit})
		if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(append([]*xaalis.AuditEntry{}, list...))
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "AT\tACTOR\tTOKEN\tFROM\tACTION\tOBJECT\tNOTE")
		dash := func(s string) string {
			if s == "" {
				return "-"
			}
			return s
		}
		for _, e := range list {
			// A note may hold tabs and line breaks, which would break the
			// table: it is shown on one line.
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s %s\t%s\n", xaalis.Timestamp(e.At), e.Actor, dash(e.TokenID), dash(e.ClientIP),
				e.Action, e.ObjectType, e.ObjectID, dash(strings.Join(strings.Fields(e.Note), " ")))
		}
		return tw.Flush()
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
		return parseError(err)
	}
	if len(pos) != 1 {
		return usagef("payout-request %s: expected one payout request ID", action)
	}
	return withEventsApp(ctx, *db, getenv, func(app *xaalis.App) error {
		pr, err := app.MovePayoutRequest(ctx, pos[0], xaalis.PayoutRequestAction(action), *reason)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("payout request %s not found", pos[0])
		} else if err != nil {
			if u := describe(err, "reason"); errors.As(u, new(usageError)) {
				return u
			}
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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		_, ps, err := app.RunLedgerCheck(ctx, false)
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

// cmdSettle records the outcome the provider gave of a payout or refund
// (typ) that no lookup settles: payout settle ID / refund settle ID
// --outcome success|failed --note TEXT.
func cmdSettle(ctx context.Context, typ xaalis.TxType, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	name := string(typ) + " settle"
	fs := newFlags(name, stderr)
	db := databaseFlag(fs, getenv)
	outcome := fs.String("outcome", "", "success or failed: what the provider says became of it")
	note := fs.String("note", "", "what the provider said of it, and where (its statement, its support's ticket); required")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) != 1 {
		return usagef("%s: expected one %s ID", name, typ)
	}
	if *outcome != "success" && *outcome != "failed" {
		return usagef("%s: --outcome must be success or failed", name)
	}
	if strings.TrimSpace(*note) == "" {
		return usagef("%s: --note is required: what the provider said of it, and where", name)
	}
	return withEventsApp(ctx, *db, getenv, func(app *xaalis.App) error {
		t, err := app.SettleByHand(ctx, typ, pos[0], xaalis.ProviderState(*outcome), *note)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("%s %s not found", typ, pos[0])
		} else if err != nil {
			return describe(err, "note", "outcome")
		}
		fmt.Fprintf(stdout, "%s %s (%s) is %s\n", typ, t.ID, t.Reference, t.Status)
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
		return parseError(err)
	}
	if len(pos) != 1 {
		return usagef("payment mark-refunded: expected one payment ID")
	}
	return withEventsApp(ctx, *db, getenv, func(app *xaalis.App) error {
		t, err := app.MarkRefunded(ctx, pos[0], *note)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("payment %s not found", pos[0])
		} else if err != nil {
			return describe(err, "note")
		}
		fmt.Fprintf(stdout, "payment %s (%s) is %s\n", t.ID, t.Reference, t.Status)
		return nil
	})
}
