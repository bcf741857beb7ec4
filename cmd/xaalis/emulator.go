package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"

	"github.com/xaalis/xaalis/internal/provider"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// cmdProviderEmulator runs the emulator of the three providers' HTTP APIs
// that live mode talks to in development, tests and benchmarks.
func cmdProviderEmulator(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("provider-emulator", stderr)
	addr := fs.String("addr", envOr(getenv, "XAALIS_EMULATOR_ADDR", "127.0.0.1:9090"), "listen address (env XAALIS_EMULATOR_ADDR); the embedded configuration's routes point at 127.0.0.1:9090")
	configPath := fs.String("config", getenv("XAALIS_CONFIG"), "configuration file whose providers and credentials to emulate (env XAALIS_CONFIG)")
	latency := fs.Int("latency-ms", 0, "delay every answer of every route")
	errorRate := fs.Float64("error-rate", 0, "share of requests answered 503 on every route, 0 to 1")
	down := fs.String("down", "", "routes that refuse connections, comma-separated provider/route (channel_a/direct)")
	timeout := fs.String("timeout", "", "routes that never answer, comma-separated provider/route")
	lose := fs.String("lose-callbacks", "", "providers whose notifications are dropped, comma-separated")
	printConfig := fs.Bool("print-config", false, "print the configuration for 'xaalis serve --config' in the development flow (every route at this emulator, with its published credentials) and exit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *printConfig {
		b, err := provider.EmulatorConfigJSON(emulatorBase(*addr))
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	if *errorRate < 0 || *errorRate > 1 || *latency < 0 {
		return usagef("provider-emulator: --error-rate must be within 0..1 and --latency-ms at least 0")
	}
	var cfg *xaalis.Config
	var err error
	if *configPath != "" {
		cfg, err = xaalis.LoadConfig(*configPath)
	} else {
		cfg, err = provider.EmulatorConfig(emulatorBase(*addr))
	}
	if err != nil {
		return err
	}
	opts := provider.EmulatorOptions{Config: cfg, Routes: map[string]provider.RouteSwitches{}, Providers: map[string]provider.ProviderSwitches{}}
	for name, spec := range cfg.Providers {
		for _, r := range spec.Routes {
			opts.Routes[name+"/"+r.Name] = provider.RouteSwitches{LatencyMS: *latency, ErrorRate: *errorRate}
		}
	}
	for flag, list := range map[string]string{"down": *down, "timeout": *timeout} {
		for _, pr := range splitComma(list) {
			sw, ok := opts.Routes[pr]
			if !ok {
				return usagef("provider-emulator: --%s %q: expected provider/route, one of %s", flag, pr, strings.Join(routeNames(opts.Routes), ", "))
			}
			if flag == "down" {
				sw.Down = true
			} else {
				sw.Timeout = true
			}
			opts.Routes[pr] = sw
		}
	}
	for _, p := range splitComma(*lose) {
		if _, ok := cfg.Providers[p]; !ok {
			return usagef("provider-emulator: --lose-callbacks: unknown provider %q", p)
		}
		opts.Providers[p] = provider.ProviderSwitches{LoseCallbacks: true}
	}
	e := provider.NewEmulator(opts)
	defer e.Close()
	fmt.Fprintln(stdout, "Switches: GET/POST /_control (see internal/provider/doc.go).")
	return e.ListenAndServe(ctx, *addr, stdout)
}

func routeNames(m map[string]provider.RouteSwitches) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// emulatorBase is the base URL a server reaches the emulator at: a
// wildcard listen address is reached on loopback.
func emulatorBase(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
