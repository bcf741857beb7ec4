package main

import (
	"encoding/json"
	"net/http"
	"os/user"
	"slices"
	"strings"
	"testing"
)

// TestReturnHostsCLI: `merchant update --return-hosts` sets the hosts a
// publishable key's return URLs may point at, through the real server.
func TestReturnHostsCLI(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		m := createMerchant(t, db)
		s := serve(t, noEnv, serveArgs(db)...)
		body := `{"merchant_ref":"pk-1","amount":5000,"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`
		s.do(t, "POST", "/v1/payments", m.Keys.PublishableTest, body).want(t, 422, "validation_error")
		out := updateMerchant(t, db, m.MerchantID, "--return-hosts", "Shop.example, pay.shop.example")
		if !slices.Equal(out.ReturnHosts, []string{"shop.example", "pay.shop.example"}) {
			t.Fatalf("return_hosts %v", out.ReturnHosts)
		}
		s.do(t, "POST", "/v1/payments", m.Keys.PublishableTest, body).want(t, 201, "")
		_, _, err := cli(t, noEnv, "merchant", "update", "--database-url", db, m.MerchantID, "--return-hosts", "https://shop.example/ok")
		wantErr(t, true, "", err)
		if out := updateMerchant(t, db, m.MerchantID, "--return-hosts", ""); len(out.ReturnHosts) != 0 {
			t.Fatalf("cleared: %v", out.ReturnHosts)
		}
	})
}

// TestOperatorTokenCLI: create with an expiry, list, revoke; the admin API
// refuses the revoked token; the audit log names the token of each admin
// action and `audit list` shows it.
// TestOperatorTokenCreateBare: `xaalis operator token create` alone, as
// the README and the guides write it, makes a token named after the user
// who ran it ($USER, else "operator").
func TestOperatorTokenCreateBare(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		var bare struct{ Name, Token string }
		withUser := func(k string) string {
			if k == "USER" {
				return "awa"
			}
			return noEnv(k)
		}
		out := mustCLI(t, withUser, "operator", "token", "create", "--database-url", db, "--json")
		if err := json.Unmarshal([]byte(out), &bare); err != nil || !strings.HasPrefix(bare.Token, "xop_") || bare.Name != "awa" {
			t.Fatalf("create without --name: %v %s", err, out)
		}
		out = mustCLI(t, noEnv, "operator", "token", "create", "--database-url", db, "--json")
		if err := json.Unmarshal([]byte(out), &bare); err != nil || bare.Name != "operator" {
			t.Fatalf("create without --name or USER: %v %s", err, out)
		}
		if out := mustCLI(t, noEnv, "operator", "token", "create", "--database-url", db); !strings.Contains(out, "xop_") {
			t.Fatalf("create, text: %s", out)
		}
	})
}

func TestOperatorTokenCLI(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		var tok struct {
			ID, Name, Token string
			ExpiresAt       *string `json:"expires_at"`
		}
		out := mustCLI(t, noEnv, "operator", "token", "create", "--database-url", db, "--name", "night shift", "--expires-in", "720h", "--json")
		if err := json.Unmarshal([]byte(out), &tok); err != nil || !strings.HasPrefix(tok.Token, "xop_") || tok.ExpiresAt == nil {
			t.Fatalf("create: %v %s", err, out)
		}
		_, _, err := cli(t, noEnv, "operator", "token", "create", "--database-url", db, "--name", "x", "--expires-at", "2001-01-01T00:00:00Z")
		if err == nil {
			t.Fatal("a token expiring in the past was made")
		}
		m := createMerchant(t, db)
		s := serve(t, noEnv, serveArgs(db)...)
		ledger := func(token string) int {
			req, _ := http.NewRequest("GET", s.admin+"/admin/v1/ledger/check", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res.StatusCode
		}
		if st := ledger(tok.Token); st != 200 {
			t.Fatalf("ledger check with a fresh token: %d", st)
		}
		list := mustCLI(t, noEnv, "operator", "token", "list", "--database-url", db)
		if !strings.Contains(list, tok.ID) || !strings.Contains(list, "night shift") || !strings.Contains(list, "active") {
			t.Fatalf("list:\n%s", list)
		}
		mustCLI(t, noEnv, "operator", "token", "revoke", "--database-url", db, tok.ID)
		if st := ledger(tok.Token); st != 401 {
			t.Fatalf("revoked token: %d", st)
		}
		var listed []struct {
			ID        string
			RevokedAt *string `json:"revoked_at"`
		}
		if err := json.Unmarshal([]byte(mustCLI(t, noEnv, "operator", "token", "list", "--database-url", db, "--json")), &listed); err != nil ||
			len(listed) != 1 || listed[0].RevokedAt == nil {
			t.Fatalf("list --json: %+v %v", listed, err)
		}
		_, _, err = cli(t, noEnv, "operator", "token", "revoke", "--database-url", db, "nope")
		if err == nil {
			t.Fatal("revoking an unknown token succeeded")
		}
		// Operator actions from the command line are audited under the
		// account that ran them.
		updateMerchant(t, db, m.MerchantID, "--kyc", "approved")
		audit := mustCLI(t, envOf("USER", "awa"), "audit", "list", "--database-url", db)
		// Without USER (cron, systemd), the process's own account.
		me, err := user.Current()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"merchant.update", "operator_token.revoke", "operator_token.create", "cli:" + me.Username + " "} {
			if !strings.Contains(audit, want) {
				t.Fatalf("audit list lacks %q:\n%s", want, audit)
			}
		}
	})
}

// TestServeLiveRoutesUnavailable: on the embedded configuration, which
// carries no credentials, serve says at start that no live route can be
// used, and a live payment is refused rather than sent.
func TestServeLiveRoutesUnavailable(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		m := createMerchant(t, db)
		updateMerchant(t, db, m.MerchantID, "--kyc", "approved")
		s := serve(t, noEnv, serveArgs(db)...)
		for _, want := range []string{"Live route channel_a/direct is unavailable: no credentials", "Provider channel_c is unavailable in live mode"} {
			if !strings.Contains(s.stdout.String(), want) {
				t.Fatalf("serve's output lacks %q:\n%s", want, s.stdout)
			}
		}
		body := `{"merchant_ref":"live-1","amount":5000,"provider":"channel_a","payer":{"phone":"+221771234567"},"success_url":"https://shop.example/ok","failed_url":"https://shop.example/ko"}`
		s.do(t, "POST", "/v1/payments", m.Keys.SecretLive, body).want(t, 422, "provider_unavailable")
	})
}
