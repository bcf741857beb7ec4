package client_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/postgres/pgtest"
	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// server is a real API server (internal/http) on a real store.
type server struct {
	app  *xaalis.App
	srv  *httptest.Server
	keys xaalis.MerchantKeys
}

type backend struct {
	name string
	open func(t *testing.T) xaalis.Store
}

var backends = []backend{
	{"SQLite", func(t *testing.T) xaalis.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
	{"PostgreSQL", func(t *testing.T) xaalis.Store {
		s, err := postgres.Open(context.Background(), pgtest.URL(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}},
}

func eachBackend(t *testing.T, f func(t *testing.T, s *server)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, newServer(t, b.open(t), nil))
		})
	}
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
