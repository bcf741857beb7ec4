package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Resolver looks host names up; *net.Resolver is one.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, host string) ([]net.IPAddr, error)

// LookupIPAddr calls f.
func (f ResolverFunc) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	return f(ctx, host)
}

// Policy is the rule set for webhook URLs (issue 5: URL rules), applied at
// registration (Check), at every delivery (Check again: DNS changes) and
// at every connection (Client: the address dialled is the address
// checked, which defeats DNS rebinding).
//
// A URL must be absolute, https, without credentials, and name a public
// host: not localhost or an internal TLD (.local, .internal, .lan, ...)
// or a single-label name, and not an address, given literally (in any
// form: dotted, decimal, octal, hexadecimal, short, IPv4-mapped IPv6,
// NAT64, ...) or through DNS, that is loopback, private, link-local,
// unique-local, CGNAT, unspecified, multicast, broadcast, reserved or a
// cloud metadata service's. Every address a name resolves to must pass,
// and the name must resolve.
type Policy struct {
	// AllowInsecure is the development switch (xaalis serve
	// --insecure-webhooks): it allows http, localhost and loopback
	// addresses. Private and metadata addresses stay refused.
	AllowInsecure bool
	// Resolver looks names up; nil is net.DefaultResolver. It is asked for
	// the absolute name (with a trailing dot), so that no search domain of
	// the server's resolv.conf applies.
	Resolver Resolver
	// AllowUnresolved accepts, in Check, a name that does not resolve (yet):
	// registration then refuses only names that resolve to a forbidden
	// address. Delivery still resolves and checks every address when it
	// connects, so nothing unchecked is ever dialled.
	AllowUnresolved bool
}

// Rules, as validation_error messages of the url field.
const (
	RuleNotAbsolute   = "url must be an absolute URL (https://host/path)"
	RuleScheme        = "url must use https"
	RuleSchemeDev     = "url must use https or http"
	RuleUserinfo      = "url must not contain credentials (user:password@)"
	RuleNoHost        = "url has no host"
	RulePort          = "url port is invalid"
	RuleHostname      = "url host is not a valid hostname or IP address"
	RuleNonASCII      = "url host must be ASCII (use the punycode xn-- form)"
	RuleLocalhost     = "url host is localhost"
	RuleSingleLabel   = "url host must be a fully qualified domain name"
	RuleIPv6Zone      = "url host must not carry an IPv6 zone"
	RuleOddIPv4       = "url host is an IPv4 address in a non-standard form; write it as four decimal numbers"
	RuleDoesNotResolv = "url does not resolve"
)

// ruleInternalTLD names an internal suffix.
func ruleInternalTLD(suffix string) string {
	return "url host has an internal TLD (." + suffix + ")"
}

// Kinds of forbidden addresses.
const (
	kindLoopback    = "a loopback"
	kindPrivate     = "a private"
	kindLinkLocal   = "a link-local"
	kindUniqueLocal = "a unique-local"
	kindCGNAT       = "a shared (CGNAT)"
	kindUnspecified = "the unspecified"
	kindMulticast   = "a multicast"
	kindBroadcast   = "the broadcast"
	kindReserved    = "a reserved"
	kindMetadata    = "a cloud metadata"
)

// internalSuffixes are TLDs (and a second-level name) that never name a
// host on the public internet.
var internalSuffixes = []string{
	"home.arpa", "arpa", "local", "internal", "lan", "home", "corp", "intranet", "private",
	"localdomain",
}

var (
	metadataAddrs = map[netip.Addr]bool{
		netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack, ...
		netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
		netip.MustParseAddr("169.254.169.253"): true, // AWS DNS
		netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
		netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud
		netip.MustParseAddr("fd00:ec2::254"):   true, // AWS (IPv6)
		netip.MustParseAddr("fd00:ec2::253"):   true, // AWS DNS (IPv6)
	}
	v4Ranges = []struct {
		p    netip.Prefix
		kind string
	}{
		{netip.MustParsePrefix("0.0.0.0/32"), kindUnspecified},
		{netip.MustParsePrefix("0.0.0.0/8"), kindReserved}, // "this network"
		{netip.MustParsePrefix("127.0.0.0/8"), kindLoopback},
		{netip.MustParsePrefix("10.0.0.0/8"), kindPrivate},
		{netip.MustParsePrefix("172.16.0.0/12"), kindPrivate},
		{netip.MustParsePrefix("192.168.0.0/16"), kindPrivate},
		{netip.MustParsePrefix("169.254.0.0/16"), kindLinkLocal},
		{netip.MustParsePrefix("100.64.0.0/10"), kindCGNAT},
		{netip.MustParsePrefix("224.0.0.0/4"), kindMulticast},
		{netip.MustParsePrefix("255.255.255.255/32"), kindBroadcast},
		{netip.MustParsePrefix("240.0.0.0/4"), kindReserved},
		{netip.MustParsePrefix("192.0.0.0/24"), kindReserved},    // IETF protocol assignments
		{netip.MustParsePrefix("192.0.2.0/24"), kindReserved},    // TEST-NET-1
		{netip.MustParsePrefix("198.51.100.0/24"), kindReserved}, // TEST-NET-2
		{netip.MustParsePrefix("203.0.113.0/24"), kindReserved},  // TEST-NET-3
		{netip.MustParsePrefix("198.18.0.0/15"), kindReserved},   // benchmarking
		{netip.MustParsePrefix("192.88.99.0/24"), kindReserved},  // 6to4 relay anycast
	}
	v6Ranges = []struct {
		p    netip.Prefix
		kind string
	}{
		{netip.MustParsePrefix("::/128"), kindUnspecified},
		{netip.MustParsePrefix("::1/128"), kindLoopback},
		{netip.MustParsePrefix("fe80::/10"), kindLinkLocal},
		{netip.MustParsePrefix("fec0::/10"), kindPrivate}, // site-local (deprecated)
		{netip.MustParsePrefix("fc00::/7"), kindUniqueLocal},
		{netip.MustParsePrefix("ff00::/8"), kindMulticast},
		{netip.MustParsePrefix("64:ff9b:1::/48"), kindPrivate}, // local-use NAT64
		{netip.MustParsePrefix("100::/64"), kindReserved},      // discard-only
		{netip.MustParsePrefix("2001:db8::/32"), kindReserved}, // documentation
		{netip.MustParsePrefix("3fff::/20"), kindReserved},     // documentation
		{netip.MustParsePrefix("2001::/23"), kindReserved},     // IETF protocol assignments (not Teredo)
	}
	prefixNAT64  = netip.MustParsePrefix("64:ff9b::/96")
	prefixTeredo = netip.MustParsePrefix("2001::/32")
	prefix6to4   = netip.MustParsePrefix("2002::/16")
	prefixCompat = netip.MustParsePrefix("::/96")
	prefixSIIT   = netip.MustParsePrefix("::ffff:0:0:0/96") // IPv4-translated
)

// classify returns the kind of a forbidden address, "" for a public one,
// and, for an IPv6 address that embeds an IPv4 one, the form.
func classify(a netip.Addr) (kind, form string) {
	a = a.WithZone("")
	if metadataAddrs[a] {
		return kindMetadata, ""
	}
	if a.Is4In6() {
		k, _ := classify(a.Unmap())
		return k, "IPv4-mapped IPv6"
	}
	if a.Is4() {
		for _, r := range v4Ranges {
			if r.p.Contains(a) {
				return r.kind, ""
			}
		}
		return "", ""
	}
	b := a.As16()
	v4 := func(x []byte) netip.Addr { return netip.AddrFrom4([4]byte{x[0], x[1], x[2], x[3]}) }
	switch {
	case a == netip.IPv6Unspecified():
		return kindUnspecified, ""
	case a == netip.IPv6Loopback():
		return kindLoopback, ""
	case prefixCompat.Contains(a):
		// ::a.b.c.d, deprecated: nothing public is reached this way.
		if k, _ := classify(v4(b[12:])); k != "" {
			return k, "IPv4-compatible IPv6"
		}
		return kindReserved, "IPv4-compatible IPv6"
	case prefixSIIT.Contains(a):
		if k, _ := classify(v4(b[12:])); k != "" {
			return k, "IPv4-translated IPv6"
		}
		return kindReserved, "IPv4-translated IPv6"
	case prefixNAT64.Contains(a):
		k, _ := classify(v4(b[12:]))
		return k, "NAT64 IPv6"
	case prefix6to4.Contains(a):
		k, _ := classify(v4(b[2:6]))
		return k, "6to4 IPv6"
	case prefixTeredo.Contains(a):
		if k, _ := classify(v4(b[4:8])); k != "" {
			return k, "Teredo IPv6"
		}
		c := [4]byte{^b[12], ^b[13], ^b[14], ^b[15]}
		k, _ := classify(netip.AddrFrom4(c))
		return k, "Teredo IPv6"
	}
	for _, r := range v6Ranges {
		if r.p.Contains(a) {
			return r.kind, ""
		}
	}
	return "", ""
}

// allowed reports whether the policy lets a kind of address through.
func (p *Policy) allowed(kind string) bool {
	return kind == "" || p.AllowInsecure && kind == kindLoopback
}

// parseIPv4Loose reads the IPv4 forms that inet_aton and browsers accept:
// one to four parts separated by dots, each decimal, octal (leading 0) or
// hexadecimal (0x), the last filling the remaining bytes (127.1 is
// 127.0.0.1, 2130706433 is 127.0.0.1). It reports false for anything else.
func parseIPv4Loose(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums [4]uint64
	for i, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	last := len(parts) - 1
	var v uint64
	for i := 0; i < last; i++ {
		if nums[i] > 255 {
			return netip.Addr{}, false
		}
		v |= nums[i] << (8 * (3 - i))
	}
	if nums[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	v |= nums[last]
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, p = 16, p[2:]
		if p == "" {
			return 0, true // "0x" is 0 to a browser
		}
	case len(p) >= 2 && p[0] == '0':
		base, p = 8, p[1:]
	}
	var n uint64
	for i := 0; i < len(p); i++ {
		var d uint64
		c := p[i]
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		n = n*base + d
		if n > 1<<32 {
			return 0, false
		}
	}
	return n, true
}

// endsInNumber reports whether a host's last label is numeric (digits, or
// 0x and hex digits): a browser then reads the host as an IPv4 address.
func endsInNumber(host string) bool {
	label := host[strings.LastIndexByte(host, '.')+1:]
	if label == "" {
		return false
	}
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		for i := 2; i < len(label); i++ {
			if !isHex(label[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(label); i++ {
		if label[i] < '0' || label[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// hostTarget is a host judged by its form: an address, or a name to
// resolve.
type hostTarget struct {
	addr netip.Addr // valid for an IP literal
	name string     // lowercase, without the trailing dot
}

// judgeHost applies the rules that need no DNS to a URL's host (as
// url.URL.Hostname returns it). It returns the target and the rules
// broken.
func (p *Policy) judgeHost(host string) (hostTarget, []string) {
	if host == "" {
		return hostTarget{}, []string{RuleNoHost}
	}
	if strings.Contains(host, ":") { // IPv6 literal
		a, err := netip.ParseAddr(host)
		if err != nil {
			return hostTarget{}, []string{RuleHostname}
		}
		var rules []string
		if a.Zone() != "" {
			rules = append(rules, RuleIPv6Zone)
			a = a.WithZone("")
		}
		if kind, form := classify(a); !p.allowed(kind) {
			rules = append(rules, addrRule("url host is", kind, form))
		}
		return hostTarget{addr: a}, rules
	}
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			return hostTarget{}, []string{RuleNonASCII}
		}
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "" || strings.HasSuffix(h, ".") {
		return hostTarget{}, []string{RuleHostname}
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if kind, form := classify(a); !p.allowed(kind) {
			return hostTarget{addr: a}, []string{addrRule("url host is", kind, form)}
		}
		return hostTarget{addr: a}, nil
	}
	if endsInNumber(h) {
		// A browser, inet_aton or a libc resolver would read an address
		// here: judge the address meant, and refuse the form anyway.
		a, ok := parseIPv4Loose(h)
		if !ok {
			return hostTarget{}, []string{RuleHostname}
		}
		if kind, _ := classify(a); !p.allowed(kind) {
			return hostTarget{addr: a}, []string{addrRule("url host is", kind, "non-standard IPv4 form")}
		}
		return hostTarget{addr: a}, []string{RuleOddIPv4}
	}
	if len(h) > 253 {
		return hostTarget{}, []string{RuleHostname}
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return hostTarget{}, []string{RuleHostname}
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return hostTarget{}, []string{RuleHostname}
			}
		}
	}
	t := hostTarget{name: h}
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		if p.AllowInsecure {
			return t, nil
		}
		return t, []string{RuleLocalhost}
	}
	for _, s := range internalSuffixes {
		if h == s || strings.HasSuffix(h, "."+s) {
			return t, []string{ruleInternalTLD(s)}
		}
	}
	if !strings.Contains(h, ".") {
		return t, []string{RuleSingleLabel}
	}
	return t, nil
}

// addrRule is the message for a forbidden address.
func addrRule(prefix, kind, form string) string {
	msg := prefix + " " + kind + " address"
	if form != "" {
		msg += " (" + form + ")"
	}
	return msg
}

// lookupTimeout bounds a lookup when the caller's context has no deadline.
const lookupTimeout = 10 * time.Second

func (p *Policy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}

// resolve looks a name up and judges every address. It returns the
// addresses, or the rule broken.
func (p *Policy) resolve(ctx context.Context, name string) ([]netip.Addr, string) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
	}
	if name == "localhost" || strings.HasSuffix(name, ".localhost") {
		// Only reached with AllowInsecure (judgeHost refuses it
		// otherwise). Not asked to the resolver: a localhost name is the
		// loopback (RFC 6761, 6.3), and glibc and Go's own resolver do
		// not find the absolute "localhost." in /etc/hosts, so that a
		// developer's http://localhost:PORT endpoint never received a
		// delivery.
		if !p.AllowInsecure {
			return nil, RuleLocalhost
		}
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}, ""
	}
	ips, err := p.resolver().LookupIPAddr(ctx, name+".")
	if err != nil || len(ips) == 0 {
		return nil, RuleDoesNotResolv
	}
	addrs := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		a, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			return nil, RuleDoesNotResolv
		}
		if a.Is4In6() {
			a = a.Unmap() // net.IP's 16-byte form of an IPv4 address
		}
		if kind, form := classify(a); !p.allowed(kind) {
			return nil, addrRule("url resolves to", kind, form)
		}
		addrs = append(addrs, a)
	}
	return addrs, ""
}

// Check applies the URL rules to a URL, resolving its host. It returns a
// validation_error whose url field names every rule broken. Its signature
// is xaalis.URLChecker's.
func (p *Policy) Check(ctx context.Context, raw string) error {
	rules := p.checkStatic(raw)
	if len(rules) == 0 {
		u, _ := url.Parse(raw)
		t, _ := p.judgeHost(u.Hostname())
		if t.name != "" {
			if _, rule := p.resolve(ctx, t.name); rule != "" && !(p.AllowUnresolved && rule == RuleDoesNotResolv) {
				rules = append(rules, rule)
			}
		}
	}
	if len(rules) == 0 {
		return nil
	}
	return &xaalis.Error{Code: xaalis.EValidation, Fields: map[string][]string{"url": rules}}
}

// Rules returns the rules a URL breaks, as Check's messages (nil: none).
func Rules(err error) []string {
	var e *xaalis.Error
	if errors.As(err, &e) {
		return e.Fields["url"]
	}
	return nil
}

// checkStatic applies the rules that need no DNS.
func (p *Policy) checkStatic(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Opaque != "" {
		return []string{RuleNotAbsolute}
	}
	var rules []string
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !p.AllowInsecure {
			rules = append(rules, RuleScheme)
		}
	default:
		if p.AllowInsecure {
			rules = append(rules, RuleSchemeDev)
		} else {
			rules = append(rules, RuleScheme)
		}
	}
	if u.User != nil {
		rules = append(rules, RuleUserinfo)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			rules = append(rules, RulePort)
		}
	}
	_, hostRules := p.judgeHost(u.Hostname())
	return append(rules, hostRules...)
}

// BlockedError is the error of a connection the policy refused.
type BlockedError struct {
	Host string
	Rule string
}

func (e *BlockedError) Error() string {
	return "webhook: connection to " + e.Host + " refused: " + e.Rule
}

// DialContext connects to addr ("host:port") after judging the host and
// every address it resolves to now; it dials an address it checked.
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil || port == 0 {
		return nil, &BlockedError{Host: addr, Rule: RulePort}
	}
	t, rules := p.judgeHost(host)
	if len(rules) > 0 {
		return nil, &BlockedError{Host: host, Rule: strings.Join(rules, "; ")}
	}
	addrs := []netip.Addr{t.addr}
	if t.name != "" {
		var rule string
		if addrs, rule = p.resolve(ctx, t.name); rule != "" {
			return nil, &BlockedError{Host: host, Rule: rule}
		}
	}
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	var errs []error
	for _, a := range addrs {
		if network == "tcp4" && !a.Is4() || network == "tcp6" && !a.Is6() {
			continue
		}
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("webhook: %s has no %s address", host, network)
	}
	return nil, errs[0]
}

// Client returns an HTTP client for deliveries: its connections go only to
// addresses the policy allows, judged when dialling; redirects are not
// followed (the 3xx answer is the answer); TLS is 1.2 or later; no proxy
// from the environment is used; timeout bounds each request.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            p.DialContext,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
