package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	// 184467440737095517 × 100 overflows into 84 (0.84 XOF).
	for _, amount := range []string{"0", "-5", "184467440737095517"} {
		stdout, _, err = cli(t, noEnv, "dispute", "open", "--transaction", p.Data.ID, "--amount", amount, "--database-url", db)
		wantErr(t, true, stdout, err)
	}

	// due_by follows the configuration's dispute_response_seconds, as the
	// server's openings do; decide takes the DSP- reference too.
	cfg := filepath.Join(t.TempDir(), "cfg.json")
	if err := os.WriteFile(cfg, []byte(`{"dispute_response_seconds":3600}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out = mustCLI(t, noEnv, "dispute", "open", "--transaction", p.Data.ID, "--config", cfg, "--json", "--database-url", db)
	var d2 struct {
		ID, Reference string
		CreatedAt     time.Time `json:"created_at"`
		DueBy         time.Time `json:"due_by"`
	}
	if err := json.Unmarshal([]byte(out), &d2); err != nil || d2.DueBy.Sub(d2.CreatedAt) != time.Hour {
		t.Fatalf("dispute open with a configuration: %s", out)
	}
	if out := mustCLI(t, noEnv, "dispute", "decide", d2.Reference, "--outcome", "won", "--database-url", db); !strings.Contains(out, d2.ID+" is won") {
		t.Fatalf("decide by reference: %s", out)
	}
	mustCLI(t, noEnv, "ledger", "check", "--database-url", db)
}
