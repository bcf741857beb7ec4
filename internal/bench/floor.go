package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// sampleRecord is a successful payment as the API answers it, for the
// HTTP floor's fixed body and the DB floor's stored response.
func sampleRecord(now time.Time) *xaalis.Transaction {
	return &xaalis.Transaction{
		ID: xaalis.NewUUIDv7(), MerchantID: xaalis.NewUUIDv7(), Mode: xaalis.ModeTest, Type: xaalis.TypePayment,
		Reference: xaalis.NewReference(), MerchantRef: "bench-0", Status: xaalis.StatusSuccess,
		Amount: xaalis.Amount{Minor: 100000, Currency: xaalis.XOF}, Country: "SN", Provider: "channel_a",
		Route: "simulator", RouteReason: "test mode", ProviderRef: "sim_a_0123456789abcdef",
		PayerPhone: "+221770000001", PayerName: "Awa Diop", CustomerID: xaalis.NewUUIDv7(),
		SuccessURL: "https://shop.example/thanks", FailedURL: "https://shop.example/sorry",
		Metadata: map[string]string{"order_id": "bench-0"}, LimitAmount: 100000,
		Fee:       xaalis.Amount{Minor: 1000, Currency: xaalis.XOF},
		ExpiresAt: now.Add(30 * time.Minute), CreatedAt: now, UpdatedAt: now,
		PaymentURL: "http://localhost:8080/checkout/0192f3a4-5b6c-7d8e-9fa0-b1c2d3e4f506",
	}
}

// prepareFloorHTTP starts an http.Server on loopback, configured like the
// API's, that reads each request and answers a fixed 201 with a payment
// record: what the machine's HTTP stack costs, with no application behind.
func prepareFloorHTTP(ctx context.Context, env *Env) (*Prepared, error) {
	rec, err := json.Marshal(struct {
		Data     any  `json:"data"`
		Livemode bool `json:"livemode"`
	}{sampleRecord(time.Now().UTC()), false})
	if err != nil {
		return nil, err
	}
	body := append(rec, '\n')
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write(body)
		}),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
	}
	go func() { _ = srv.Serve(ln) }()
	api := &API{Base: "http://" + ln.Addr().String(), Client: env.API.Client, Secret: "sk_test_floor"}
	op := func(ctx context.Context, seq int64) Outcome {
		ref := fmt.Sprintf("%s-%d", env.RunID, seq)
		rep, err := api.Do(ctx, http.MethodPost, "/v1/payments", api.Secret, ref, paymentBody(ref, 1000, "channel_a", Phone(seq, "0001")))
		return outcome("", rep, err, http.StatusCreated)
	}
	return &Prepared{Op: op, Close: func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, Notes: []string{fmt.Sprintf("an http.Server on 127.0.0.1 reading the create-payment request and answering a fixed %d-byte 201", len(body))}}, nil
}

// prepareFloorDB writes what create-payment writes, straight through the
// Store, on the server's database: claim an Idempotency-Key (the Store
// claims in a transaction of its own, as the API does), then one durable
// transaction holding the transaction row, a ledger entry with its
// postings and cached balances, the outbox event and the stored response.
func prepareFloorDB(ctx context.Context, env *Env) (*Prepared, error) {
	if env.Store == nil || env.MerchantID == "" {
		return nil, errors.New("floor-db needs the server's database (--database-url)")
	}
	store, mid := env.Store, env.MerchantID
	op := func(ctx context.Context, seq int64) Outcome {
		if err := floorDBWrite(ctx, store, mid, fmt.Sprintf("%s-%d", env.RunID, seq), seq); err != nil {
			var e *xaalis.Error
			if errors.As(err, &e) {
				return Outcome{Code: "store: " + string(e.Code)}
			}
			return Outcome{Code: "store: " + err.Error()}
		}
		return Outcome{OK: true}
	}
	return &Prepared{Op: op, Notes: []string{
		"through the Store: ClaimIdempotency (its own commit, as the API claims), then one Update with " +
			"InsertTransaction, PostEntry (3 postings, cached balances), InsertEvent and CompleteIdempotency: two durable commits"}}, nil
}

// floorDBWrite is one floor-db operation.
func floorDBWrite(ctx context.Context, store xaalis.Store, merchantID, ref string, seq int64) error {
	now := time.Now().UTC().Truncate(time.Microsecond)
	body := paymentBody(ref, 1000, "channel_a", Phone(seq, "0001"))
	scope := xaalis.IdempotencyScope{MerchantID: merchantID, Mode: xaalis.ModeTest, KeyType: xaalis.KeySecret, Key: ref}
	token := xaalis.RandomString(24, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
	res, err := store.ClaimIdempotency(ctx, xaalis.Claim{
		Scope: scope, Fingerprint: xaalis.Fingerprint(http.MethodPost, "/v1/payments", "", body), Token: token,
		Now: now, Lease: 2 * time.Minute, QuotaLimit: 1 << 30, QuotaWindow: time.Hour,
	})
	if err != nil {
		return err
	}
	if res.Outcome != xaalis.ClaimAcquired {
		return fmt.Errorf("claim outcome %d", res.Outcome)
	}
	t := sampleRecord(now)
	t.MerchantID, t.MerchantRef, t.Metadata = merchantID, ref, map[string]string{"order_id": ref}
	t.PayerPhone, t.CustomerID = Phone(seq, "0001"), ""
	// (Not xaalis.RandomString with a 16-letter alphabet: it never returns
	// for an alphabet whose size divides 256.)
	t.ProviderRef = "sim_a_" + randomHex(8)
	data, err := json.Marshal(t)
	if err != nil {
		return err
	}
	stored := append(append([]byte(`{"data":`), data...), []byte(`,"livemode":false}`+"\n")...)
	mode := string(xaalis.ModeTest)
	return store.Update(ctx, func(tx xaalis.Tx) error {
		if err := tx.InsertTransaction(ctx, t); err != nil {
			return err
		}
		amt, fee := t.Amount.Minor, t.Fee.Minor
		if err := tx.PostEntry(ctx, &ledger.Entry{ID: xaalis.NewUUIDv7(), Mode: mode, MerchantID: merchantID,
			Kind: "payment.success", RefType: "transaction", RefID: t.ID, CreatedAt: now, Postings: []ledger.Posting{
				{Account: ledger.Provider(mode, "channel_a", ledger.Clearing), Currency: "XOF", Amount: -amt},
				{Account: ledger.Merchant(mode, merchantID, ledger.Available), Currency: "XOF", Amount: amt - fee},
				{Account: ledger.Fees(mode), Currency: "XOF", Amount: fee},
			}}); err != nil {
			return err
		}
		if err := tx.InsertEvent(ctx, &xaalis.Event{ID: xaalis.NewUUIDv7(), MerchantID: merchantID, Mode: xaalis.ModeTest,
			Type: xaalis.EventPaymentSuccess, ObjectType: "transaction", ObjectID: t.ID, Data: data, CreatedAt: now}); err != nil {
			return err
		}
		return tx.CompleteIdempotency(ctx, scope, token, xaalis.StoredResponse{Status: http.StatusCreated,
			ContentType: "application/json", Body: stored})
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
