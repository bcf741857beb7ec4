package http_test

import (
	"fmt"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// TestPayoutRequestIBAN: a withdrawal to an IBAN whose check digits,
// country or length are wrong answers 422 naming destination_iban, and
// reserves nothing; a real one (spaces dropped) is submitted.
func TestPayoutRequestIBAN(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		_, keys := e.merchant()
		key := keys.SecretTest
		e.fund(t, key, 1, 10000)
		before := e.balance(t, key)
		submit := func(i int, iban string) *response {
			return e.do(call{method: "POST", path: "/v1/payout-requests", key: key, idem: fmt.Sprint("iban-", i),
				body: fmt.Sprintf(`{"amount":1000,"destination_iban":%q}`, iban), invalid: true})
		}
		for i, iban := range []string{"ZZ12ABCDEFGHIJKL", "SN00AAAAAAAAAAAAAAAAAAAAAAAA", "FR7630006000011234567890188", "SN08SN010015200004850000303"} {
			r := submit(i, iban).want(t, 422, xaalis.EValidation)
			if len(r.err.Errors["destination_iban"]) == 0 {
				t.Fatalf("%s: %s", iban, r.body)
			}
		}
		if after := e.balance(t, key); after.Available != before.Available {
			t.Fatalf("refused withdrawals moved the balance: %+v, then %+v", before, after)
		}
		submit(10, "SN08 SN01 0015 2000 0485 0000 3035").want(t, 201, "")
	})
}
