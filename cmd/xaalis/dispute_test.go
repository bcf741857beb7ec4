package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/internal/provider"
)

// TestDisputeCLI opens and decides disputes with the CLI while a server
// runs on the same database.
func TestDisputeCLI(t *testing.T) {
	db := "sqlite://" + filepath.Join(t.TempDir(), "x.db")
	m := createMerchant(t, db)
	s := serve(t, noEnv, serveArgs(db)...)
	key := m.Keys.SecretTest
	r := s.do(t, "POST", "/v1/payments", key, `{"merchant_ref":"dc-1","amount":10000,"provider":"channel_a",
		"payer":{"phone":"`+provider.TestPhoneSuccess+`"},"success_url":"https://s.example/ok","failed_url":"https://s.example/ko"}`).want(t, 201, "")
	var p struct{ Data struct{ ID string } }
	_ = json.Unmarshal(r.body, &p)

	out := mustCLI(t, noEnv, "dispute", "open", "--transaction", p.Data.ID, "--amount", "4000", "--reason", "not received", "--json", "--database-url", db)
	var d struct{ ID, Status, Amount string }
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.Status != "needs_response" || d.Amount != "4000.00" {
		t.Fatalf("dispute open: %s", out)
	}
	var list struct{ Data []struct{ ID string } }
	_ = json.Unmarshal(s.do(t, "GET", "/v1/disputes?status=needs_response", key, "").want(t, 200, "").body, &list)
	if len(list.Data) != 1 || list.Data[0].ID != d.ID {
		t.Fatalf("the server does not see it: %+v", list)
	}
	stdout, _, err := cli(t, noEnv, "dispute", "open", "--transaction", p.Data.ID, "--database-url", db)
	wantErr(t, false, stdout, err) // one open dispute per payment
	stdout, _, err = cli(t, noEnv, "dispute", "decide", d.ID, "--outcome", "maybe", "--database-url", db)
	wantErr(t, true, stdout, err) // a bad command line
	out = mustCLI(t, noEnv, "dispute", "decide", d.ID, "--outcome", "won", "--database-url", db)
	if !strings.Contains(out, "won") {
		t.Fatalf("decide: %s", out)
	}
	stdout, _, err = cli(t, noEnv, "dispute", "decide", d.ID, "--outcome", "lost", "--database-url", db)
	wantErr(t, false, stdout, err) // closed
	stdout, _, err = cli(t, noEnv, "dispute", "open", "--database-url", db)
	wantErr(t, true, stdout, err)
	mustCLI(t, noEnv, "ledger", "check", "--database-url", db)
}
