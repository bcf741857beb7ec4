package http_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
)

// TestPprof: the admin listener serves the runtime's profiles only when
// asked (serve --pprof), never the command line (it may carry the
// database URL), and a profile may last past the listener's write
// timeout, as a benchmark's phase does.
func TestPprof(t *testing.T) {
	e := newEnv(t, openSQLite(t))
	apiSrv := xhttp.NewServer(e.app, slogDiscard(), xhttp.DefaultConfig(), api.OpenAPI, nil)
	listen := func(t *testing.T, opts xhttp.AdminOptions, write time.Duration) string {
		srv := httptest.NewUnstartedServer(xhttp.NewAdmin(e.app, slogDiscard(), apiSrv, nil, opts))
		srv.Config.WriteTimeout = write
		srv.Start()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	get := func(t *testing.T, url string) (int, []byte) {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		return res.StatusCode, b
	}

	t.Run("off by default", func(t *testing.T) {
		base := listen(t, xhttp.AdminOptions{}, time.Minute)
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/profile?seconds=1", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
			if status, b := get(t, base+p); status != 404 || !strings.Contains(string(b), `"not_found"`) {
				t.Fatalf("GET %s without --pprof: %d %s", p, status, b)
			}
		}
	})

	t.Run("on", func(t *testing.T) {
		// A write timeout shorter than the profiles asked. net/http/pprof
		// moves the deadline to the timeout past the profile's end, so the
		// timeout is also the time left to build the profile once its
		// window closes: an allocations delta of this test binary under
		// -race, on a loaded machine, once took more than 1 s (EOF).
		base := listen(t, xhttp.AdminOptions{Pprof: true}, 3*time.Second)
		if status, b := get(t, base+"/debug/pprof/"); status != 200 || !strings.Contains(string(b), "goroutine") {
			t.Fatalf("index: %d %.200s", status, b)
		}
		if status, b := get(t, base+"/debug/pprof/cmdline"); status != 404 || strings.Contains(string(b), "xaalis") ||
			strings.Contains(string(b), "test") {
			t.Fatalf("cmdline: %d %q", status, b)
		}
		for _, p := range []string{"/debug/pprof/profile?seconds=4", "/debug/pprof/allocs?seconds=4", "/debug/pprof/heap"} {
			status, b := get(t, base+p)
			if status != 200 {
				t.Fatalf("GET %s: %d %.300s", p, status, b)
			}
			if _, err := profile.ParseData(b); err != nil {
				t.Fatalf("GET %s: not a profile: %v", p, err)
			}
		}
		if status, b := get(t, base+"/debug/pprof/trace?seconds=3.5"); status != 200 || len(b) == 0 {
			t.Fatalf("trace: %d, %d bytes", status, len(b))
		}
	})
}
