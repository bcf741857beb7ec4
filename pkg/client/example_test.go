package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
	"github.com/xaalis/xaalis/pkg/client"
)

// exampleServer starts a real Xaalis API on SQLite, as `xaalis serve`
// would, and returns its address and a secret test key.
func exampleServer() (baseURL, key string, stop func()) {
	dir, _ := os.MkdirTemp("", "xaalis-example")
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "x.db"))
	if err != nil {
		panic(err)
	}
	app := xaalis.NewApp(store)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	app.Gateway = provider.New(app.Config, provider.Options{Logger: log,
		Notify: func(ctx context.Context, n xaalis.Notification) {
			_, _ = app.ApplyNotification(ctx, xaalis.ModeTest, n)
		}})
	cfg := xhttp.DefaultConfig()
	cfg.StreamPoll = 20 * time.Millisecond
	srv := httptest.NewServer(xhttp.NewServer(app, log, cfg, api.OpenAPI, nil))
	app.BaseURL = srv.URL
	_, keys, err := app.CreateMerchant(context.Background(), xaalis.MerchantCreate{Name: "Boutique Saint-Louis"})
	if err != nil {
		panic(err)
	}
	return srv.URL, keys.SecretTest, func() { srv.Close(); store.Close(); os.RemoveAll(dir) }
}

func Example() {
	base, key, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	c := client.New(key, client.WithBaseURL(base))
	p, err := c.Payments.Create(ctx, &client.PaymentParams{
		MerchantRef: "ORDER-42",
		Amount:      5000, // whole XOF
		Provider:    client.ProviderChannelA,
		Payer:       &client.Payer{Phone: "+221770000001"}, // a test number that succeeds at once
		SuccessURL:  "https://shop.example/ok",
		FailedURL:   "https://shop.example/ko",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Status, p.Amount, p.Currency, *p.MerchantRef)
	b, _ := c.Balance.Get(ctx)
	fmt.Println("available:", b.Available)
	// Output:
	// success 5000.00 XOF ORDER-42
	// available: 4950
}

func ExampleError() {
	base, key, stop := exampleServer()
	defer stop()
	c := client.New(key, client.WithBaseURL(base))

	_, err := c.Payouts.Create(context.Background(), &client.PayoutParams{
		MerchantRef: "PAYOUT-1", Amount: 1_000_000, Provider: client.ProviderChannelA,
		Recipient: client.PayoutRecipient{Phone: "+221770000001"},
	})
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.HTTPStatus, e.Code, e.Context["currency"])
	}
	// Output:
	// 422 insufficient_balance XOF
}

func ExamplePlanService_List() {
	base, key, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	c := client.New(key, client.WithBaseURL(base))
	for _, name := range []string{"Bronze", "Silver", "Gold"} {
		if _, err := c.Plans.Create(ctx, &client.PlanParams{Name: name, Amount: 2500, Interval: client.IntervalMonth}); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Every plan, newest first, two a page: the iterator fetches the pages.
	for plan, err := range c.Plans.List(ctx, &client.PlanListParams{ListParams: client.ListParams{PerPage: 2}}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(plan.Name, plan.Amount)
	}
	// Output:
	// Gold 2500.00
	// Silver 2500.00
	// Bronze 2500.00
}

func ExampleClient_Listen() {
	base, key, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New(key, client.WithBaseURL(base))

	connected := make(chan struct{})
	go func() {
		<-connected
		c.Payments.Create(ctx, &client.PaymentParams{MerchantRef: "ORDER-7", Amount: 5000, Provider: client.ProviderChannelA,
			Payer:      &client.Payer{Phone: "+221770000002"}, // a test number that fails at once
			SuccessURL: "https://shop.example/ok", FailedURL: "https://shop.example/ko"})
	}()
	for ev, err := range c.Listen(ctx, &client.ListenParams{Types: []string{"payment.*"},
		OnConnect: func(string) { close(connected) }}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		we, _ := ev.Parse() // the 2026-06-01 webhook format, as pkg/webhook reads it
		fmt.Println(ev.Type, we.MerchantReference)
		cancel() // one is enough here
	}
	// Output:
	// payment.failed ORDER-7
}
