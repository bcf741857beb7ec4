package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/internal/provider"
)

// TestOperatorCLI drives the operator's commands against a running server:
// operator token create, payout-request approve|reject|complete|fail,
// payment mark-refunded, and ledger check, which fails on a corrupted
// balance.
func TestOperatorCLI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db := "sqlite://" + path
	m := createMerchant(t, db)
	s := serve(t, noEnv, serveArgs(db)...)
	key := m.Keys.SecretTest
	pay := func(ref, prov string) string {
		r := s.do(t, "POST", "/v1/payments", key, `{"merchant_ref":"`+ref+`","amount":100000,"provider":"`+prov+`",
			"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://s.example/ok","failed_url":"https://s.example/ko"}`).want(t, 201, "")
		var p struct{ Data struct{ ID, Status string } }
		if err := json.Unmarshal(r.body, &p); err != nil || p.Data.Status != "success" {
			t.Fatalf("funding payment: %s", r.body)
		}
		return p.Data.ID
	}
	pay("cli-1", "channel_a")
	submit := func() string {
		r := s.do(t, "POST", "/v1/payout-requests", key, `{"amount":10000,"destination_phone":"+221771112233"}`).want(t, 201, "")
		var pr struct{ Data struct{ ID string } }
		if err := json.Unmarshal(r.body, &pr); err != nil {
			t.Fatal(err)
		}
		return pr.Data.ID
	}
	status := func(id string) string {
		var pr struct{ Data struct{ Status string } }
		_ = json.Unmarshal(s.do(t, "GET", "/v1/payout-requests/"+id, key, "").want(t, 200, "").body, &pr)
		return pr.Data.Status
	}

	t.Run("OKPayoutRequestMoves", func(t *testing.T) {
		a := submit()
		out := mustCLI(t, noEnv, "payout-request", "approve", a, "--database-url", db)
		if !strings.Contains(out, "approved") || status(a) != "approved" {
			t.Fatalf("approve: %s", out)
		}
		mustCLI(t, noEnv, "payout-request", "complete", "--database-url", db, a)
		if status(a) != "completed" {
			t.Fatal("complete")
		}
		var sets struct {
			Data []struct {
				PayoutRequestID string `json:"payout_request_id"`
			}
		}
		_ = json.Unmarshal(s.do(t, "GET", "/v1/settlements", key, "").want(t, 200, "").body, &sets)
		if len(sets.Data) != 1 || sets.Data[0].PayoutRequestID != a {
			t.Fatalf("settlements: %+v", sets)
		}
		b := submit()
		_, _, err := cli(t, noEnv, "payout-request", "reject", b, "--database-url", db)
		wantErr(t, true, "", err) // a reason is required: a bad command line
		// A reason the text rules refuse is a bad command line, and
		// moves nothing.
		_, _, err = cli(t, noEnv, "payout-request", "reject", b, "--reason", "unknown\x1b[2Jaccount", "--database-url", db)
		wantErr(t, true, "", err)
		if status(b) != "submitted" {
			t.Fatal("a refused reason moved the request")
		}
		mustCLI(t, noEnv, "payout-request", "reject", b, "--reason", "unknown account", "--database-url", db)
		if status(b) != "rejected" {
			t.Fatal("reject")
		}
		if e := lastAudit(t, db); e.Action != "payout_request.reject" || e.Note != "unknown account" {
			t.Fatalf("the reject's audit entry: %+v", e)
		}
		stdout, _, err := cli(t, noEnv, "payout-request", "approve", b, "--database-url", db)
		wantErr(t, false, stdout, err) // rejected is final
		c := submit()
		// Named by its PR- reference, as the API and the CLI's answers name it.
		var pr struct{ Data struct{ Reference string } }
		_ = json.Unmarshal(s.do(t, "GET", "/v1/payout-requests/"+c, key, "").want(t, 200, "").body, &pr)
		if !strings.HasPrefix(pr.Data.Reference, "PR-") {
			t.Fatalf("reference %q", pr.Data.Reference)
		}
		mustCLI(t, noEnv, "payout-request", "approve", pr.Data.Reference, "--database-url", db)
		if status(c) != "approved" {
			t.Fatal("approve by reference")
		}
		mustCLI(t, noEnv, "payout-request", "fail", c, "--reason", "bank refused", "--database-url", db)
		if status(c) != "failed" {
			t.Fatal("fail")
		}
		stdout, _, err = cli(t, noEnv, "payout-request", "approve", "no-such-id", "--database-url", db)
		wantErr(t, false, stdout, err)
		stdout, _, err = cli(t, noEnv, "payout-request", "bogus", c, "--database-url", db)
		wantErr(t, true, stdout, err)
	})
	t.Run("OKMarkRefunded", func(t *testing.T) {
		id := pay("cli-b", "channel_b")
		r := s.do(t, "POST", "/v1/refunds", key, `{"transaction_id":"`+id+`","amount":1000}`).want(t, 422, "refund_not_supported")
		_ = r
		// The event it writes names the hosted page at the public address
		// serve's own would (XAALIS_PUBLIC_URL), not at localhost:8080.
		// Named by its merchant_ref, as the console names it.
		_, _, err := cli(t, noEnv, "payment", "mark-refunded", "cli-b", "--note", "paid back\x07", "--database-url", db)
		wantErr(t, true, "", err) // a bell in the note: a bad command line, nothing marked
		out := mustCLI(t, envOf("XAALIS_PUBLIC_URL", "https://pay.example.com"), "payment", "mark-refunded", "cli-b", "--note", "paid back by payout po-9\nby the merchant", "--database-url", db)
		if !strings.Contains(out, "refunded") {
			t.Fatalf("mark-refunded: %s", out)
		}
		// The note is the operator's evidence: kept in the audit entry,
		// and shown on one line by audit list.
		if e := lastAudit(t, db); e.Action != "payment.mark_refunded" || e.Note != "paid back by payout po-9\nby the merchant" {
			t.Fatalf("the audit entry: %+v", e)
		}
		if out := mustCLI(t, noEnv, "audit", "list", "--limit", "1", "--database-url", db); !strings.Contains(out, "paid back by payout po-9 by the merchant") {
			t.Fatalf("audit list: %s", out)
		}
		var evs struct {
			Data []struct {
				Data struct {
					PaymentURL string `json:"payment_url"`
				}
			}
		}
		_ = json.Unmarshal(s.do(t, "GET", "/v1/events?type=payment.refunded", key, "").want(t, 200, "").body, &evs)
		if len(evs.Data) != 1 || evs.Data[0].Data.PaymentURL != "https://pay.example.com/checkout/"+id {
			t.Fatalf("payment.refunded events: %+v", evs)
		}
		var p struct{ Data struct{ Status string } }
		_ = json.Unmarshal(s.do(t, "GET", "/v1/payments/"+id, key, "").want(t, 200, "").body, &p)
		if p.Data.Status != "refunded" {
			t.Fatalf("status %s", p.Data.Status)
		}
	})
	t.Run("OKPayoutSettle", func(t *testing.T) {
		// A test payout to a number whose payout never settles: the
		// operator records the outcome its provider gave by hand.
		r := s.do(t, "POST", "/v1/payouts", key, `{"merchant_ref":"cli-po-1","amount":1000,"currency":"XOF","provider":"channel_a",
			"recipient":{"phone":"`+provider.TestPhoneNoPayer+`","name":"Moussa"}}`).want(t, 201, "")
		var po struct {
			Data struct{ ID, Reference, Status string }
		}
		if err := json.Unmarshal(r.body, &po); err != nil || po.Data.Status != "pending" {
			t.Fatalf("the payout: %s", r.body)
		}
		for _, args := range [][]string{
			{"payout", "settle", po.Data.ID, "--outcome", "failed"},                 // no note
			{"payout", "settle", po.Data.ID, "--outcome", "maybe", "--note", "x"},   // no such outcome
			{"payout", "settle", "--outcome", "failed", "--note", "x"},              // no ID
			{"payout", "settle", po.Data.ID, "--outcome", "failed", "--note", "x"}, // a bell
			{"payout", "bogus", po.Data.ID},
		} {
			stdout, _, err := cli(t, noEnv, append(args, "--database-url", db)...)
			wantErr(t, true, stdout, err)
		}
		stdout, _, err := cli(t, noEnv, "refund", "settle", po.Data.ID, "--outcome", "failed", "--note", "x", "--database-url", db)
		wantErr(t, false, stdout, err) // a payout is no refund: not found
		out := mustCLI(t, noEnv, "payout", "settle", po.Data.Reference, "--outcome", "failed", "--note", "channel_a support: never paid", "--database-url", db)
		if !strings.Contains(out, "is failed") {
			t.Fatalf("payout settle: %s", out)
		}
		if e := lastAudit(t, db); e.Action != "payout.settle_by_hand" || e.Note != "channel_a support: never paid" {
			t.Fatalf("the audit entry: %+v", e)
		}
		stdout, _, err = cli(t, noEnv, "payout", "settle", po.Data.ID, "--outcome", "success", "--note", "x", "--database-url", db)
		wantErr(t, false, stdout, err) // failed already: a state refusal, exit 1
		var got struct {
			Data struct {
				Status        string
				FailureReason string `json:"failure_reason"`
			}
		}
		_ = json.Unmarshal(s.do(t, "GET", "/v1/payouts/"+po.Data.ID, key, "").want(t, 200, "").body, &got)
		if got.Data.Status != "failed" || got.Data.FailureReason != "settled_by_operator" {
			t.Fatalf("the payout after: %+v", got)
		}
	})
	t.Run("ErrControlCharacters", func(t *testing.T) {
		// The command line sends no JSON, so the API's input hygiene never
		// saw what it stores: each command applies the same rules, and a
		// value they refuse is a bad command line that changes nothing.
		for _, args := range [][]string{
			{"merchant", "create", "--name", "Evil\x1b[31m"},
			{"merchant", "update", m.MerchantID, "--name", "Bad\x01Name"},
			{"merchant", "update", m.MerchantID, "--name", "   "},
			{"operator", "token", "create", "--name", "op\x1b[2J"},
			{"dispute", "open", "--transaction", "cli-1", "--reason", "bad\x07reason"},
			{"dispute", "decide", "DSP-NONE", "--outcome", "won", "--note", "\x1b"},
			{"payout-request", "approve", "p", "--reason", "\x9b"},
			{"payment", "mark-refunded", "cli-1", "--note", "x\x00"},
		} {
			before := len(auditEntries(t, db))
			stdout, _, err := cli(t, noEnv, append(args, "--database-url", db)...)
			wantErr(t, true, stdout, err)
			if n := len(auditEntries(t, db)); n != before {
				t.Errorf("%q: %d audit entries, %d before", args, n, before)
			}
		}
	})
	t.Run("OKOperatorToken", func(t *testing.T) {
		out := mustCLI(t, noEnv, "operator", "token", "create", "--name", "ops", "--json", "--database-url", db)
		var tok struct{ Token string }
		if err := json.Unmarshal([]byte(out), &tok); err != nil || !strings.HasPrefix(tok.Token, "xop_") {
			t.Fatalf("token: %s", out)
		}
		check := func(token string) int {
			req, _ := http.NewRequest("GET", s.admin+"/admin/v1/ledger/check", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		if st := check(tok.Token); st != 200 {
			t.Fatalf("ledger check with the token: %d", st)
		}
		if st := check("xop_wrong"); st != 401 {
			t.Fatalf("a wrong token: %d", st)
		}
	})
	t.Run("ErrLedgerCheck", func(t *testing.T) {
		out := mustCLI(t, noEnv, "ledger", "check", "--database-url", db)
		if !strings.Contains(out, "consistent") {
			t.Fatalf("clean ledger: %s", out)
		}
		// Corrupt one cached balance behind the server's back.
		raw, err := sql.Open("sqlite", "file:"+path)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		if _, err := raw.ExecContext(context.Background(), `UPDATE ledger_balances SET balance = balance + 1
			WHERE account LIKE '%:available'`); err != nil {
			t.Fatal(err)
		}
		stdout, _, err := cli(t, noEnv, "ledger", "check", "--database-url", db)
		if err == nil || !strings.Contains(stdout, "cached balance") {
			t.Fatalf("corrupted ledger passed: %v\n%s", err, stdout)
		}
	})
}

// auditEntries is the audit log, newest first, as audit list --json
// prints it.
func auditEntries(t *testing.T, db string) []auditOut {
	t.Helper()
	var list []auditOut
	if err := json.Unmarshal([]byte(mustCLI(t, noEnv, "audit", "list", "--json", "--limit", "100", "--database-url", db)), &list); err != nil {
		t.Fatal(err)
	}
	return list
}

type auditOut struct {
	Action string
	Note   *string
}

// lastAudit is the newest audit entry, its note "" when it has none.
func lastAudit(t *testing.T, db string) struct{ Action, Note string } {
	t.Helper()
	list := auditEntries(t, db)
	if len(list) == 0 {
		t.Fatal("no audit entry")
	}
	e := struct{ Action, Note string }{Action: list[0].Action}
	if list[0].Note != nil {
		e.Note = *list[0].Note
	}
	return e
}
