package http

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// The client address is the one address a request is known by: IP
// allowlists, the per-address rate limits, failed-auth throttling, the
// access log and the audit log all read it (clientIP). It is the TCP peer,
// unless the peer is a trusted proxy (--trusted-proxies): then it is read
// from X-Forwarded-For (or, when the request has none, Forwarded), walking
// right to left past the trusted hops. The rightmost entries are the ones
// the trusted proxies wrote; anything to the left of the first untrusted
// hop was written by the client and is never believed.

// ParseTrustedProxies reads a comma-separated list of CIDR prefixes or
// single addresses ("127.0.0.1/32,10.0.0.0/8,::1").
func ParseTrustedProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if strings.Contains(part, "/") {
			p, err := netip.ParsePrefix(part)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: not a CIDR prefix", part)
			}
			if p.Addr().Is4In6() {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an IP address or CIDR prefix", part)
		}
		a = a.Unmap().WithZone("")
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// trusted reports whether a is one of the trusted proxies.
func trusted(list []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range list {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the TCP peer of a request.
func peerAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		a, _ := netip.ParseAddr(r.RemoteAddr)
		return a.Unmap()
	}
	return ap.Addr().Unmap()
}

// clientAddr derives the client address of a request from its peer and
// headers, trusting the proxies in list.
func clientAddr(peer netip.Addr, h http.Header, list []netip.Prefix) netip.Addr {
	if len(list) == 0 || !peer.IsValid() || !trusted(list, peer) {
		return peer
	}
	var hops []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, v := range xff {
			hops = append(hops, strings.Split(v, ",")...)
		}
	} else if fwd := h.Values("Forwarded"); len(fwd) > 0 {
		for _, v := range fwd {
			hops = append(hops, forwardedFor(v)...)
		}
	}
	addr := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(hops[i])
		if !ok {
			// An entry nobody can read (garbage, "unknown", an obfuscated
			// name): the request is known by the nearest trusted hop.
			return addr
		}
		addr = a
		if !trusted(list, a) {
			return a
		}
	}
	return addr
}

// parseNode reads one hop: an IPv4 or IPv6 address, possibly with a port
// ("192.0.2.1:4711", "[2001:db8::1]:4711", "[2001:db8::1]").
func parseNode(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}

// forwardedFor returns the for= node of each element of a Forwarded
// header (RFC 7239), left to right; an element without one gives "" (an
// unreadable hop).
func forwardedFor(v string) []string {
	var out []string
	for _, elem := range splitQuoted(v, ',') {
		node := ""
		for _, pair := range splitQuoted(elem, ';') {
			name, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "for") {
				continue
			}
			val = strings.TrimSpace(val)
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = strings.ReplaceAll(val[1:len(val)-1], `\`, "")
			}
			node = val
		}
		out = append(out, node)
	}
	return out
}

// splitQuoted splits s at sep outside double-quoted strings.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case !quoted && c == sep:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
