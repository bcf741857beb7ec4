package webhook_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/xaalis/xaalis/pkg/webhook"
)

// A receiver: verify the signature on the raw body, parse, deduplicate on
// the event id (deliveries are at least once), answer 200 at once and do
// the work afterwards.
func Example() {
	secret := "whsec_0123456789abcdefghijABCDEFGHIJ" // the endpoint's secret, from its creation

	var (
		mu   sync.Mutex
		seen = map[string]bool{} // use your database in production
		work = make(chan *webhook.Event, 16)
	)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		ev, err := webhook.ConstructEvent(body, r.Header.Get(webhook.Header), secret)
		if err != nil {
			http.Error(w, "bad signature", http.StatusBadRequest)
			return
		}
		mu.Lock()
		dup := seen[ev.ID]
		seen[ev.ID] = true
		mu.Unlock()
		if !dup {
			work <- ev // handle it out of the request: answer within seconds
		}
		w.WriteHeader(http.StatusOK)
	})

	// What Xaalis sends (here signed by hand), twice: a retry.
	srv := httptest.NewServer(handler)
	defer srv.Close()
	body := []byte(`{"id":"6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01","object":"event","type":"payment.success",` +
		`"api_version":"2026-06-01","created":1767225600,"livemode":false,"sequence":2,` +
		`"data":{"id":"6f1c1e0a-7d0b-4a43-9d7e-1f3b1f0a0c01","merchant_reference":"ORDER-42",` +
		`"object":{"id":"0b9c6c1e-1111-4222-8333-944445555666","object":"transaction","status":"success"}}}`)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.Header, webhook.Sign(body, []string{secret}, time.Now()))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	ev := <-work
	fmt.Println(ev.Type, ev.MerchantReference, ev.Sequence, len(work))
	// Output:
	// 200
	// 200
	// payment.success ORDER-42 2 0
}
