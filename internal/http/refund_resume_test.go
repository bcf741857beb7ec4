package http_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// paidPayment is a successful payment of 5000 XOF (the simulator's magic
// number settles it at once).
func paidPayment(t *testing.T, e *env, p *xaalis.Principal, ref string) *xaalis.Transaction {
	t.Helper()
	pay, err := e.app.CreatePayment(context.Background(), p, "", xaalis.PaymentInput{MerchantRef: text(ref), Amount: amount(5000),
		Provider: text("channel_a"), PayerPhone: text(provider.TestPhoneSuccess),
		SuccessURL: text("https://s.example/ok"), FailedURL: text("https://s.example/ko")})
	if err != nil || pay.Status != xaalis.StatusSuccess {
		t.Fatalf("payment: %+v, %v", pay, err)
	}
	return pay
}

// TestRefundResumedAfterFullRefund: a refund asked again under its
// Idempotency-Key after it committed (its answer lost to a crash, the
// refund finished by the dispatcher after a takeover) gets the refund,
// even though its payment is refunded by then, and no second refund is
// made. The chaos suite's TestCrash found it: the retry was refused
// transaction_already_fully_refunded, a refund in the database that no
// answer gave.
func TestRefundResumedAfterFullRefund(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		e := newEnv(t, b.open(t))
		ctx := context.Background()
		_, keys := e.merchant()
		p := e.principal(keys.SecretTest)
		pay := paidPayment(t, e, p, "resume-1")
		in := xaalis.RefundInput{TransactionID: text(pay.ID), Amount: amount(5000)}
		first, err := e.app.CreateRefund(ctx, p, "rf-resume", in)
		if err != nil {
			t.Fatal(err)
		}
		again, err := e.app.CreateRefund(ctx, p, "rf-resume", in)
		if err != nil || again.ID != first.ID || again.Status != first.Status {
			t.Fatalf("the same refund asked again: %+v, %v; want refund %s (%s)", again, err, first.ID, first.Status)
		}
		// Another key is a new refund, refused: the payment is refunded.
		var xe *xaalis.Error
		if _, err := e.app.CreateRefund(ctx, p, "rf-other", in); !errors.As(err, &xe) || xe.Code != xaalis.ETransactionAlreadyFullyRefunded {
			t.Fatalf("a refund of another key: %v, want transaction_already_fully_refunded", err)
		}
		if _, err := e.app.CreateRefund(ctx, p, "", in); !errors.As(err, &xe) || xe.Code != xaalis.ETransactionAlreadyFullyRefunded {
			t.Fatalf("a refund without a key: %v, want transaction_already_fully_refunded", err)
		}
	})
}

// heldRefunds is the real gateway, with its refunds held until released
// and its providers taken as remote (two commits a command, as in live
// mode), so that refunds of one payment are on their way together.
type heldRefunds struct {
	xaalis.Gateway
	release chan struct{}
	asked   chan string
}

func (g *heldRefunds) InProcess(xaalis.Mode) bool { return false }

func (g *heldRefunds) Refund(ctx context.Context, r xaalis.RefundRequest) (xaalis.PayoutResult, error) {
	g.asked <- r.Reference
	select {
	case <-g.release:
	case <-ctx.Done():
		return xaalis.PayoutResult{}, ctx.Err()
	}
	return g.Gateway.Refund(ctx, r)
}

// TestRefundsSettlingInTurn: two refunds of half a payment each, both
// sent before either succeeds. The first to succeed leaves the payment
// success (payment.partially_refunded); the second refunds it, once
// (payment.refunded). The payment used to count refunds still on their
// way: refunded at the first success, and payment.refunded again at the
// second.
func TestRefundsSettlingInTurn(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		g := &heldRefunds{release: make(chan struct{}), asked: make(chan string, 2)}
		e := newEnv(t, b.open(t), func(_ *xhttp.Config, a *xaalis.App) { g.Gateway = a.Gateway; a.Gateway = g })
		ctx := context.Background()
		_, keys := e.merchant()
		p := e.principal(keys.SecretTest)
		pay := paidPayment(t, e, p, "turns-1")
		done := make(chan error, 2)
		for i := range 2 {
			go func() {
				_, err := e.app.CreateRefund(ctx, p, fmt.Sprint("turn-", i), xaalis.RefundInput{TransactionID: text(pay.ID), Amount: amount(2500)})
				done <- err
			}()
		}
		<-g.asked
		<-g.asked // both refunds are committed and at the provider
		for i, want := range []string{"success", "refunded"} {
			g.release <- struct{}{}
			if err := <-done; err != nil {
				t.Fatalf("refund %d: %v", i+1, err)
			}
			got, err := e.app.Payment(ctx, p, pay.ID)
			if err != nil || string(got.Status) != want {
				t.Fatalf("after refund %d succeeded: %v %v, want %s", i+1, got.Status, err, want)
			}
		}
		evs := strings.Join(e.events(t, pay.ID), ",")
		if evs != "payment.success,payment.partially_refunded,payment.refunded" {
			t.Fatalf("payment events %s", evs)
		}
		e.ledgerOK(t)
	})
}
