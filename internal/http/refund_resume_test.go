package http_test

import (
	"context"
	"errors"
	"testing"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

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
		pay, err := e.app.CreatePayment(ctx, p, xaalis.PaymentInput{MerchantRef: text("resume-1"), Amount: amount(5000),
			Provider: text("channel_a"), PayerPhone: text(provider.TestPhoneSuccess),
			SuccessURL: text("https://s.example/ok"), FailedURL: text("https://s.example/ko")})
		if err != nil || pay.Status != xaalis.StatusSuccess {
			t.Fatalf("payment: %+v, %v", pay, err)
		}
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
