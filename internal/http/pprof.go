package http

import (
	"net/http"
	"net/http/pprof"
)

// Profiling, opt-in (`xaalis serve --pprof`), on the admin listener only:
// the runtime's profiles of a running server, for `go tool pprof
// http://ADMIN/debug/pprof/profile?seconds=30` and for `xaalis bench
// --server-process --cpuprofile`. /debug/pprof/cmdline is never served:
// serve's command line may carry the database URL and its password. A
// profile of ?seconds=N may outlast the admin listener's write timeout
// (60 s): net/http/pprof moves the connection's write deadline N seconds
// on. Importing net/http/pprof also registers its handlers, cmdline
// among them, on http.DefaultServeMux: no listener of xaalis serves that
// mux.

// pprofRoutes are the profiling routes, in the order docs/security.md
// lists them.
var pprofRoutes = []struct {
	pattern string
	h       http.HandlerFunc
}{
	// The index, and every profile runtime/pprof names under it (heap,
	// allocs, goroutine, block, mutex, threadcreate), with ?seconds=N for
	// the difference over N seconds. cmdline is not one of them: the
	// index answers it 404.
	{"GET /debug/pprof/", pprof.Index},
	{"GET /debug/pprof/profile", pprof.Profile},
	{"GET /debug/pprof/trace", pprof.Trace},
	{"GET /debug/pprof/symbol", pprof.Symbol},
	{"POST /debug/pprof/symbol", pprof.Symbol},
}

func init() {
	// A profile shows nothing of the database: its answer waits for no
	// write to be durable.
	for _, p := range pprofRoutes {
		readsNothing[p.pattern] = true
	}
}

// routesPprof registers the profiling routes.
func (a *Admin) routesPprof() {
	for _, p := range pprofRoutes {
		a.registry = append(a.registry, Route{Pattern: p.pattern, Access: "none (admin listener, only with `xaalis serve --pprof`)"})
		a.mux.HandleFunc(p.pattern, p.h)
	}
}
