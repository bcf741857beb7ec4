package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/testutil"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// server is a real API server (internal/http) on a real store.
type server struct {
	app  *xaalis.App
	srv  *httptest.Server
	keys xaalis.MerchantKeys
}

func eachBackend(t *testing.T, f func(t *testing.T, s *server)) {
	testutil.EachBackend(t, func(t *testing.T, b testutil.Backend) { f(t, newServer(t, b.Open(t), nil)) })
}

// newServer serves the API over store; wrap, when set, wraps its handler
// (fault injection).
func newServer(t testing.TB, store xaalis.Store, wrap func(http.Handler) http.Handler) *server {
	s := &server{app: xaalis.NewApp(store)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s.app.Gateway = provider.New(s.app.Config, provider.Options{Logger: log,
		Notify: func(ctx context.Context, n xaalis.Notification) {
			_, _ = s.app.ApplyNotification(ctx, xaalis.ModeTest, n)
		}})
	cfg := xhttp.DefaultConfig()
	cfg.StreamPoll = 20 * time.Millisecond
	var h http.Handler = xhttp.NewServer(s.app, log, cfg, api.OpenAPI, nil)
	if wrap != nil {
		h = wrap(h)
	}
	s.srv = httptest.NewServer(h)
	t.Cleanup(s.srv.Close)
	s.app.BaseURL = s.srv.URL
	_, keys, err := s.app.CreateMerchant(context.Background(), xaalis.MerchantCreate{Name: "Boutique Ziguinchor"})
	if err != nil {
		t.Fatal(err)
	}
	s.keys = keys
	return s
}
