package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// dns is a resolver seam: a table of answers, with a default for names
// it does not list. It records the names asked.
type dns struct {
	mu      sync.Mutex
	answers map[string][]string
	def     []string
	asked   []string
}

func (d *dns) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked = append(d.asked, host)
	ips, ok := d.answers[strings.TrimSuffix(host, ".")]
	if !ok {
		ips = d.def
	}
	if len(ips) == 1 && ips[0] == "NXDOMAIN" {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, 0, len(ips))
	for _, s := range ips {
		out = append(out, net.IPAddr{IP: net.ParseIP(s)})
	}
	return out, nil
}

func (d *dns) set(host string, ips ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.answers[host] = ips
}

const publicIP = "93.184.216.34"

func newDNS() *dns {
	return &dns{def: []string{publicIP}, answers: map[string][]string{
		"private.example.com":      {"10.0.0.5"},
		"loopback.example.com":     {"127.0.0.1"},
		"metadata.example.com":     {"169.254.169.254"},
		"mixed.example.com":        {publicIP, "192.168.1.20"},
		"mapped.example.com":       {"::ffff:127.0.0.1"},
		"v6private.example.com":    {"2606:2800:220:1::1", "fd00::1"},
		"cgnat.example.com":        {"100.64.1.1"},
		"nat64.example.com":        {"64:ff9b::a9fe:a9fe"},
		"nowhere.example.com":      {"NXDOMAIN"},
		"empty.example.com":        {},
		"localhost":                {"127.0.0.1", "::1"},
		"dev.localhost":            {"127.0.0.1"},
		"v6.example.com":           {"2606:2800:220:1:248:1893:25c8:1946"},
		"alibaba.example.com":      {"100.100.100.200"},
		"unspecified.example.com":  {"0.0.0.0"},
		"linklocal6.example.com":   {"fe80::1"},
		"multicast.example.com":    {"224.0.0.251"},
		"awsmetadata6.example.com": {"fd00:ec2::254"},
	}}
}

func rulesOf(t *testing.T, err error) []string {
	t.Helper()
	var e *xaalis.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *xaalis.Error", err)
	}
	if e.Code != xaalis.EValidation {
		t.Fatalf("code %s, want validation_error", e.Code)
	}
	return e.Fields["url"]
}

type urlCase struct {
	name, url, rule string // rule: a substring of one message
}

var refused = []urlCase{
	{"ErrNotAbsoluteRelative", "/hook", RuleNotAbsolute},
	{"ErrNotAbsoluteNoScheme", "example.com/hook", RuleNotAbsolute},
	{"ErrNotAbsoluteOpaque", "https:example.com/hook", RuleNotAbsolute},
	{"ErrNotAbsoluteEmpty", "", RuleNotAbsolute},
	{"ErrUnparsable", "https://exa mple.com/", RuleNotAbsolute},
	{"ErrUnparsableControl", "https://example.com/\x7f\n", RuleNotAbsolute},
	{"ErrUnparsableBadEscape", "https://exa%zzmple.com/", RuleNotAbsolute},
	{"ErrJavascriptScheme", "javascript:alert(1)", RuleNotAbsolute},
	{"ErrSchemeHTTP", "http://example.com/hook", RuleScheme},
	{"ErrSchemeFTP", "ftp://example.com/hook", RuleScheme},
	{"ErrSchemeFile", "file:///etc/passwd", RuleScheme},
	{"ErrSchemeGopher", "gopher://example.com:70/", RuleScheme},
	{"ErrUserinfo", "https://user:secret@example.com/hook", RuleUserinfo},
	{"ErrUserinfoNoPassword", "https://user@example.com/hook", RuleUserinfo},
	{"ErrUserinfoHidesLoopback", "https://example.com@127.0.0.1/hook", "loopback"},
	{"ErrNoHost", "https:///hook", RuleNoHost},
	{"ErrNoHostPortOnly", "https://:443/hook", RuleNoHost},
	{"ErrPortZero", "https://example.com:0/hook", RulePort},
	{"ErrPortTooBig", "https://example.com:65536/hook", RulePort},
	{"ErrHostnameEmptyLabel", "https://example..com/hook", RuleHostname},
	{"ErrHostnameHyphen", "https://-example.com/hook", RuleHostname},
	{"ErrHostnameTooLong", "https://" + strings.Repeat("a", 64) + ".com/", RuleHostname},
	{"ErrHostnameNonASCII", "https://exämple.com/hook", RuleNonASCII},
	{"ErrLocalhost", "https://localhost/hook", RuleLocalhost},
	{"ErrLocalhostUpper", "https://LocalHost./hook", RuleLocalhost},
	{"ErrLocalhostSubdomain", "https://api.localhost/hook", RuleLocalhost},
	{"ErrInternalTLDLocal", "https://printer.local/hook", "(.local)"},
	{"ErrInternalTLDInternal", "https://metadata.google.internal/computeMetadata/v1/", "(.internal)"},
	{"ErrInternalTLDLan", "https://router.lan/", "(.lan)"},
	{"ErrInternalTLDHome", "https://nas.home/", "(.home)"},
	{"ErrInternalTLDCorp", "https://erp.corp/", "(.corp)"},
	{"ErrInternalTLDIntranet", "https://wiki.intranet/", "(.intranet)"},
	{"ErrInternalTLDPrivate", "https://db.private/", "(.private)"},
	{"ErrInternalTLDLocaldomain", "https://host.localdomain/", "(.localdomain)"},
	{"ErrInternalTLDHomeArpa", "https://gw.home.arpa/", "(.home.arpa)"},
	{"ErrInternalTLDArpa", "https://1.0.0.127.in-addr.arpa/", "(.arpa)"},
	{"ErrInternalTLDTrailingDot", "https://printer.local./hook", "(.local)"},
	{"ErrInternalTLDUpper", "https://PRINTER.LOCAL/hook", "(.local)"},
	{"ErrSingleLabel", "https://receiver/hook", RuleSingleLabel},
	{"ErrSingleLabelPort", "https://billing:8443/hook", RuleSingleLabel},

	{"ErrLoopback", "https://127.0.0.1/hook", "url host is a loopback address"},
	{"ErrLoopbackEnd", "https://127.255.255.254/hook", "loopback"},
	{"ErrLoopbackPort", "https://127.0.0.1:8443/hook", "loopback"},
	{"ErrLoopbackTrailingDot", "https://127.0.0.1./hook", "loopback"},
	{"ErrLoopbackDecimal", "https://2130706433/hook", "loopback address (non-standard IPv4 form)"},
	{"ErrLoopbackOctal", "https://0177.0.0.1/hook", "loopback"},
	{"ErrLoopbackOctalWhole", "https://017700000001/hook", "loopback"},
	{"ErrLoopbackOctalPadded", "https://0000177.0.0.01/hook", "loopback"},
	{"ErrLoopbackHex", "https://0x7f.0.0.1/hook", "loopback"},
	{"ErrLoopbackHexWhole", "https://0x7f000001/hook", "loopback"},
	{"ErrLoopbackHexUpper", "https://0X7F.0X0.0X0.0X1/hook", "loopback"},
	{"ErrLoopbackShort", "https://127.1/hook", "loopback"},
	{"ErrLoopbackShortThree", "https://127.0.1/hook", "loopback"},
	{"ErrLoopbackMixed", "https://0x7f.0.01/hook", "loopback"},
	{"ErrLoopbackMixedShort", "https://0177.0x1/hook", "loopback"},
	{"ErrLoopbackIPv6", "https://[::1]/hook", "loopback"},
	{"ErrLoopbackIPv6Long", "https://[0:0:0:0:0:0:0:1]/hook", "loopback"},
	{"ErrLoopbackIPv4Mapped", "https://[::ffff:127.0.0.1]/hook", "loopback address (IPv4-mapped IPv6)"},
	{"ErrLoopbackIPv4MappedHex", "https://[::ffff:7f00:1]/hook", "loopback address (IPv4-mapped IPv6)"},
	{"ErrLoopbackIPv4MappedLong", "https://[0:0:0:0:0:ffff:127.0.0.1]/hook", "loopback"},
	{"ErrLoopbackIPv4Compatible", "https://[::127.0.0.1]/hook", "loopback address (IPv4-compatible IPv6)"},
	{"ErrLoopbackIPv4Translated", "https://[::ffff:0:127.0.0.1]/hook", "loopback"},
	{"ErrLoopbackNAT64", "https://[64:ff9b::127.0.0.1]/hook", "loopback address (NAT64 IPv6)"},
	{"ErrLoopback6to4", "https://[2002:7f00:1::1]/hook", "loopback address (6to4 IPv6)"},
	{"ErrPrivate10", "https://10.0.0.1/hook", "url host is a private address"},
	{"ErrPrivate172", "https://172.16.0.1/hook", "private"},
	{"ErrPrivate172End", "https://172.31.255.255/hook", "private"},
	{"ErrPrivate192", "https://192.168.1.1/hook", "private"},
	{"ErrPrivateDecimal", "https://167772161/hook", "private"},
	{"ErrPrivateHex", "https://0xc0a80101/hook", "private"},
	{"ErrPrivateShort", "https://10.1/hook", "private"},
	{"ErrPrivateIPv4Mapped", "https://[::ffff:10.0.0.1]/hook", "private address (IPv4-mapped IPv6)"},
	{"ErrPrivateIPv4MappedHex", "https://[::ffff:c0a8:101]/hook", "private"},
	{"ErrPrivateNAT64", "https://[64:ff9b::10.0.0.1]/hook", "private address (NAT64 IPv6)"},
	{"ErrPrivateNAT64Hex", "https://[64:ff9b::c0a8:101]/hook", "private"},
	{"ErrPrivateNAT64LocalUse", "https://[64:ff9b:1::a00:1]/hook", "private"},
	{"ErrPrivate6to4", "https://[2002:c0a8:101::1]/hook", "private address (6to4 IPv6)"},
	{"ErrPrivateSiteLocalIPv6", "https://[fec0::1]/hook", "private"},
	{"ErrLinkLocal", "https://169.254.1.1/hook", "link-local"},
	{"ErrLinkLocalIPv6", "https://[fe80::1]/hook", "link-local"},
	{"ErrLinkLocalIPv6Zone", "https://[fe80::1%25eth0]/hook", RuleIPv6Zone},
	{"ErrLinkLocalIPv4Mapped", "https://[::ffff:169.254.1.1]/hook", "link-local"},
	{"ErrUniqueLocal", "https://[fc00::1]/hook", "unique-local"},
	{"ErrUniqueLocalFD", "https://[fd12:3456:789a::1]/hook", "unique-local"},
	{"ErrCGNAT", "https://100.64.0.1/hook", "CGNAT"},
	{"ErrCGNATEnd", "https://100.127.255.254/hook", "CGNAT"},
	{"ErrCGNATIPv4Mapped", "https://[::ffff:100.64.0.1]/hook", "CGNAT"},
	{"ErrUnspecified", "https://0.0.0.0/hook", "unspecified"},
	{"ErrUnspecifiedDecimal", "https://0/hook", "unspecified"},
	{"ErrUnspecifiedHex", "https://0x0/hook", "unspecified"},
	{"ErrUnspecifiedIPv6", "https://[::]/hook", "unspecified"},
	{"ErrUnspecifiedIPv4Mapped", "https://[::ffff:0.0.0.0]/hook", "unspecified"},
	{"ErrThisNetwork", "https://0.1.2.3/hook", "reserved"},
	{"ErrMulticast", "https://224.0.0.1/hook", "multicast"},
	{"ErrMulticastSSDP", "https://239.255.255.250/hook", "multicast"},
	{"ErrMulticastIPv6", "https://[ff02::1]/hook", "multicast"},
	{"ErrMulticastIPv4Mapped", "https://[::ffff:224.0.0.1]/hook", "multicast"},
	{"ErrBroadcast", "https://255.255.255.255/hook", "broadcast"},
	{"ErrBroadcastDecimal", "https://4294967295/hook", "broadcast"},
	{"ErrBroadcastHex", "https://0xffffffff/hook", "broadcast"},
	{"ErrReserved240", "https://240.0.0.1/hook", "reserved"},
	{"ErrReservedTestNet", "https://192.0.2.10/hook", "reserved"},
	{"ErrReservedDocIPv6", "https://[2001:db8::1]/hook", "reserved"},
	{"ErrReservedIPv4CompatiblePublic", "https://[::93.184.216.34]/hook", "IPv4-compatible"},
	{"ErrMetadata", "https://169.254.169.254/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataDecimal", "https://2852039166/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataHex", "https://0xa9fea9fe/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataOctal", "https://0251.0376.0251.0376/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataShort", "https://169.254.43518/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataMixed", "https://0xa9.254.0251.0xfe/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataIPv6Mapped", "https://[::ffff:169.254.169.254]/latest/", "cloud metadata address (IPv4-mapped IPv6)"},
	{"ErrMetadataIPv6MappedHex", "https://[::ffff:a9fe:a9fe]/latest/", "cloud metadata"},
	{"ErrMetadataIPv6Compatible", "https://[::169.254.169.254]/latest/", "cloud metadata"},
	{"ErrMetadataNAT64", "https://[64:ff9b::169.254.169.254]/latest/", "cloud metadata address (NAT64 IPv6)"},
	{"ErrMetadataAWSIPv6", "https://[fd00:ec2::254]/latest/", "cloud metadata"},
	{"ErrMetadataAlibaba", "https://100.100.100.200/latest/meta-data/", "cloud metadata"},
	{"ErrMetadataOracle", "https://192.0.0.192/opc/v1/", "cloud metadata"},
	{"ErrMetadataECS", "https://169.254.170.2/v2/credentials", "cloud metadata"},
	{"ErrOddFormPublic", "https://1572395042/hook", RuleOddIPv4},
	{"ErrOddFormPublicShort", "https://93.184.55330/hook", RuleOddIPv4},
	{"ErrOddFormPublicOctal", "https://0135.0270.0330.042/hook", RuleOddIPv4},
	{"ErrNumericHostTooManyParts", "https://1.2.3.4.5/hook", RuleHostname},
	{"ErrNumericHostOverflow", "https://256.1.1.1/hook", RuleHostname},
	{"ErrNumericHostBigDecimal", "https://4294967296/hook", RuleHostname},
	{"ErrNumericHostBadOctal", "https://example.08/hook", RuleHostname},
	{"ErrNumericTLD", "https://example.123/hook", RuleHostname},
	{"ErrDNSPrivate", "https://private.example.com/hook", "url resolves to a private address"},
	{"ErrDNSLoopback", "https://loopback.example.com/hook", "url resolves to a loopback address"},
	{"ErrDNSMetadata", "https://metadata.example.com/hook", "url resolves to a cloud metadata address"},
	{"ErrDNSAnyPrivate", "https://mixed.example.com/hook", "url resolves to a private address"},
	{"ErrDNSMappedLoopback", "https://mapped.example.com/hook", "url resolves to a loopback address"},
	{"ErrDNSUniqueLocalIPv6", "https://v6private.example.com/hook", "unique-local"},
	{"ErrDNSCGNAT", "https://cgnat.example.com/hook", "CGNAT"},
	{"ErrDNSNAT64Metadata", "https://nat64.example.com/hook", "cloud metadata"},
	{"ErrDNSAlibabaMetadata", "https://alibaba.example.com/hook", "cloud metadata"},
	{"ErrDNSAWSMetadataIPv6", "https://awsmetadata6.example.com/hook", "cloud metadata"},
	{"ErrDNSUnspecified", "https://unspecified.example.com/hook", "unspecified"},
	{"ErrDNSLinkLocalIPv6", "https://linklocal6.example.com/hook", "link-local"},
	{"ErrDNSMulticast", "https://multicast.example.com/hook", "multicast"},
	{"ErrDoesNotResolve", "https://nowhere.example.com/hook", RuleDoesNotResolv},
	{"ErrResolvesToNothing", "https://empty.example.com/hook", RuleDoesNotResolv},
}

var accepted = []string{
	"https://example.com/hook",
	"https://EXAMPLE.com:8443/hooks/xaalis?merchant=42#frag",
	"https://example.com./hook",
	"https://hooks.shop-example.sn/xaalis",
	"https://xn--mnchen-3ya.de/hook",
	"https://v6.example.com/hook",
	"https://" + publicIP + "/hook",
	"https://8.8.8.8:443/hook",
	"https://[2606:2800:220:1:248:1893:25c8:1946]/hook",
	"https://[64:ff9b::5db8:d822]/hook", // NAT64 of a public address
	"https://[::ffff:93.184.216.34]/hook",
	"https://172.32.0.1/hook",  // just past 172.16/12
	"https://100.128.0.1/hook", // just past 100.64/10
	"https://1e100.net/hook",
	"https://123.example.com/hook",
}

func TestPolicyCheckRefuses(t *testing.T) {
	p := &Policy{Resolver: newDNS()}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			err := p.Check(context.Background(), c.url)
			if err == nil {
				t.Fatalf("Check(%q) accepted", c.url)
			}
			rules := rulesOf(t, err)
			for _, r := range rules {
				if strings.Contains(r, c.rule) {
					return
				}
			}
			t.Fatalf("Check(%q) = %q, want a rule containing %q", c.url, rules, c.rule)
		})
	}
}

func TestPolicyCheckAccepts(t *testing.T) {
	d := newDNS()
	p := &Policy{Resolver: d}
	for _, u := range accepted {
		t.Run(u, func(t *testing.T) {
			if err := p.Check(context.Background(), u); err != nil {
				t.Fatalf("Check(%q) = %v", u, err)
			}
		})
	}
	// Names are looked up absolute: no search domain applies.
	for _, h := range d.asked {
		if !strings.HasSuffix(h, ".") {
			t.Errorf("resolver asked for %q", h)
		}
	}
	// The default resolver is used when none is given: an IP literal needs
	// no lookup at all.
	if err := (&Policy{}).Check(context.Background(), "https://"+publicIP+"/hook"); err != nil {
		t.Fatal(err)
	}
}

func TestPolicyCheckNamesEveryRule(t *testing.T) {
	err := (&Policy{Resolver: newDNS()}).Check(context.Background(), "http://user:pw@127.0.0.1:0/")
	rules := rulesOf(t, err)
	want := []string{RuleScheme, RuleUserinfo, RulePort, "url host is a loopback address"}
	if strings.Join(rules, "|") != strings.Join(want, "|") {
		t.Fatalf("rules %q, want %q", rules, want)
	}
	if got := Rules(err); len(got) != 4 {
		t.Fatalf("Rules = %q", got)
	}
	var checker xaalis.URLChecker = (&Policy{}).Check // the signature fits
	_ = checker
}

// TestPolicyInsecureLocalhost: with --insecure-webhooks a localhost name
// is the loopback, whatever the resolver says: glibc's and Go's do not
// find "localhost." (the absolute name the policy asks for) in /etc/hosts.
func TestPolicyInsecureLocalhost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	nowhere := ResolverFunc(func(context.Context, string) ([]net.IPAddr, error) {
		return nil, &net.DNSError{Err: "no such host", IsNotFound: true}
	})
	p := &Policy{AllowInsecure: true, Resolver: nowhere}
	for _, host := range []string{"localhost", "dev.localhost"} {
		u := "http://" + host + ":" + port + "/hook"
		if err := p.Check(context.Background(), u); err != nil {
			t.Fatalf("Check(%q) = %v", u, err)
		}
		c, err := p.DialContext(context.Background(), "tcp", host+":"+port)
		if err != nil {
			t.Fatalf("DialContext(%s:%s) = %v", host, port, err)
		}
		c.Close()
	}
	if err := (&Policy{Resolver: nowhere}).Check(context.Background(), "https://localhost/hook"); err == nil {
		t.Fatal("localhost accepted without AllowInsecure")
	}
}

func TestPolicyInsecure(t *testing.T) {
	p := &Policy{AllowInsecure: true, Resolver: newDNS()}
	for _, u := range []string{
		"http://127.0.0.1:8080/hook", "http://localhost:8080/hook", "https://localhost/hook",
		"http://dev.localhost/hook", "http://[::1]:9000/hook", "http://[::ffff:127.0.0.1]/hook",
		"http://loopback.example.com/hook", "http://example.com/hook", "https://example.com/hook",
	} {
		if err := p.Check(context.Background(), u); err != nil {
			t.Errorf("insecure Check(%q) = %v", u, err)
		}
	}
	for _, c := range []urlCase{
		{"MetadataLiteral", "http://169.254.169.254/latest/", "cloud metadata"},
		{"MetadataDecimal", "http://2852039166/latest/", "cloud metadata"},
		{"MetadataMapped", "http://[::ffff:169.254.169.254]/", "cloud metadata"},
		{"MetadataAWSIPv6", "http://[fd00:ec2::254]/", "cloud metadata"},
		{"MetadataAlibaba", "http://100.100.100.200/", "cloud metadata"},
		{"MetadataDNS", "http://metadata.example.com/", "cloud metadata"},
		{"Private", "http://10.0.0.1/", "private"},
		{"PrivateDNS", "http://private.example.com/", "private"},
		{"LinkLocal", "http://169.254.1.1/", "link-local"},
		{"LoopbackOddForm", "http://2130706433/", RuleOddIPv4},
		{"InternalTLD", "http://printer.local/", "(.local)"},
		{"SchemeFTP", "ftp://example.com/", RuleSchemeDev},
	} {
		t.Run(c.name, func(t *testing.T) {
			rules := rulesOf(t, p.Check(context.Background(), c.url))
			if !strings.Contains(strings.Join(rules, "|"), c.rule) {
				t.Fatalf("rules %q, want %q", rules, c.rule)
			}
		})
	}
}

func TestParseIPv4Loose(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1": "127.0.0.1", "2130706433": "127.0.0.1", "0177.0.0.1": "127.0.0.1", "0x7f.0.0.1": "127.0.0.1",
		"127.1": "127.0.0.1", "127.0.1": "127.0.0.1", "0x7f.1": "127.0.0.1", "0": "0.0.0.0", "0x": "0.0.0.0",
		"1.2.3.4": "1.2.3.4", "1.2.772": "1.2.3.4", "1.131844": "1.2.3.4", "0xffffffff": "255.255.255.255",
		"00000000000000000001": "0.0.0.1",
	} {
		a, ok := parseIPv4Loose(in)
		if !ok || a != netip.MustParseAddr(want) {
			t.Errorf("parseIPv4Loose(%q) = %v %v, want %s", in, a, ok, want)
		}
	}
	for _, in := range []string{"", ".", "1..2", "1.2.3.4.5", "256.0.0.1", "1.2.3.256", "1.2.65536", "4294967296",
		"08", "0x1g", "a.b.c.d", "1.2.3.-4", "99999999999999999999"} {
		if a, ok := parseIPv4Loose(in); ok {
			t.Errorf("parseIPv4Loose(%q) = %v, want refused", in, a)
		}
	}
}

// The client judges the address when it dials: a name that resolved to a
// public address at registration and now resolves to a private one is
// refused (DNS rebinding), and nothing is sent.
func TestClientRefusesRebinding(t *testing.T) {
	d := newDNS()
	d.set("hooks.example.com", publicIP)
	p := &Policy{Resolver: d}
	const u = "https://hooks.example.com/xaalis"
	if err := p.Check(context.Background(), u); err != nil {
		t.Fatalf("registration: %v", err)
	}
	for _, ip := range []string{"10.0.0.5", "127.0.0.1", "169.254.169.254", "::ffff:192.168.0.1"} {
		d.set("hooks.example.com", ip)
		_, err := p.Client(0).Post(u, "application/json", strings.NewReader("{}"))
		var be *BlockedError
		if !errors.As(err, &be) || !strings.Contains(be.Rule, "url resolves to") {
			t.Fatalf("rebound to %s: err %v, want a BlockedError", ip, err)
		}
	}
}

// The client dials the address it checked, not whatever a second lookup
// would return; with AllowInsecure, loopback is reachable (local work).
func TestClientDialsCheckedAddress(t *testing.T) {
	var hits atomic.Int32
	var host atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		host.Store(r.Host)
	}))
	defer srv.Close()
	d := newDNS()
	d.set("receiver.example.com", "127.0.0.1")
	u := "http://receiver.example.com:" + srvPort(t, srv.URL) + "/hook"

	resp, err := (&Policy{AllowInsecure: true, Resolver: d}).Client(0).Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || hits.Load() != 1 {
		t.Fatalf("status %d, hits %d", resp.StatusCode, hits.Load())
	}
	// The Host header names the URL's host, not the address dialled.
	if h := host.Load(); h != "receiver.example.com:"+srvPort(t, srv.URL) {
		t.Fatalf("Host %v", h)
	}
	// A strict policy refuses the same name: it resolves to loopback.
	_, err = (&Policy{Resolver: d}).Client(0).Get(u)
	var be *BlockedError
	if !errors.As(err, &be) || !strings.Contains(be.Rule, "loopback") {
		t.Fatalf("strict client: %v", err)
	}
	// And literal addresses are judged too.
	_, err = (&Policy{Resolver: d}).Client(0).Get(srv.URL)
	if !errors.As(err, &be) || !strings.Contains(be.Rule, "loopback") {
		t.Fatalf("strict client to %s: %v", srv.URL, err)
	}
	if hits.Load() != 1 {
		t.Fatalf("hits %d", hits.Load())
	}
}

func srvPort(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

func TestClientTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	d := newDNS()
	d.set("example.com", "127.0.0.1") // httptest's certificate names example.com
	c := (&Policy{AllowInsecure: true, Resolver: d}).Client(0)
	tr := c.Transport.(*http.Transport)
	if tr.TLSClientConfig.MinVersion != tls.VersionTLS12 || tr.Proxy != nil {
		t.Fatalf("transport: min TLS %x, proxy %v", tr.TLSClientConfig.MinVersion, tr.Proxy != nil)
	}
	tr.TLSClientConfig.RootCAs = srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	u := "https://example.com:" + srvPort(t, srv.URL) + "/hook"
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("TLS to the checked address: %v", err)
	}
	resp.Body.Close()

	// The certificate is checked against the URL's host, not the address.
	d.set("other.example.net", "127.0.0.1")
	if _, err := c.Get("https://other.example.net:" + srvPort(t, srv.URL) + "/"); err == nil {
		t.Fatal("certificate for another name accepted")
	}

	// A server that speaks TLS 1.1 at most is refused.
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS11}
	old.StartTLS()
	defer old.Close()
	if _, err := c.Get("https://example.com:" + srvPort(t, old.URL) + "/"); err == nil {
		t.Fatal("TLS 1.1 accepted")
	}
}

func TestClientDoesNotFollowRedirects(t *testing.T) {
	var target atomic.Int32
	dst := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { target.Add(1) }))
	defer dst.Close()
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, dst.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer src.Close()
	s := &Sender{Client: (&Policy{AllowInsecure: true}).Client(0)}
	status, err := s.Send(context.Background(), src.URL, []byte(`{}`), "t=1,v1=00")
	if status != http.StatusTemporaryRedirect || err == nil || err.Error() != "http 307" {
		t.Fatalf("Send = %d, %v", status, err)
	}
	if target.Load() != 0 {
		t.Fatal("redirect followed")
	}
}

// FuzzCheckURL: Check never panics, and a URL a strict policy accepts is
// https, has no credentials, and names no address in a forbidden range,
// by an independent judgement (net.IP's own classification).
func FuzzCheckURL(f *testing.F) {
	for _, c := range refused {
		f.Add(c.url)
	}
	for _, u := range accepted {
		f.Add(u)
	}
	p := &Policy{Resolver: ResolverFunc(func(context.Context, string) ([]net.IPAddr, error) {
		return []net.IPAddr{{IP: net.ParseIP(publicIP)}}, nil
	})}
	insecure := &Policy{AllowInsecure: true, Resolver: p.Resolver}
	f.Fuzz(func(t *testing.T, raw string) {
		_ = insecure.Check(context.Background(), raw)
		if err := p.Check(context.Background(), raw); err != nil {
			if len(Rules(err)) == 0 {
				t.Fatalf("Check(%q) = %v without a rule", raw, err)
			}
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted unparsable %q", raw)
		}
		if u.Scheme != "https" || u.User != nil || u.Hostname() == "" {
			t.Fatalf("accepted %q", raw)
		}
		host := strings.TrimSuffix(u.Hostname(), ".")
		if ip := net.ParseIP(host); ip != nil {
			if forbiddenIndependent(ip) {
				t.Fatalf("accepted %q: %s is forbidden", raw, ip)
			}
			return
		}
		if endsInNumber(host) || strings.Contains(host, ":") {
			t.Fatalf("accepted %q: a non-standard address", raw)
		}
		lower := strings.ToLower(host)
		if lower == "localhost" || !strings.Contains(lower, ".") {
			t.Fatalf("accepted %q: internal name", raw)
		}
		for _, s := range []string{".local", ".internal", ".localhost", ".lan", ".home", ".corp", ".intranet", ".private", ".localdomain", ".arpa"} {
			if strings.HasSuffix(lower, s) {
				t.Fatalf("accepted %q: internal TLD", raw)
			}
		}
	})
}

func forbiddenIndependent(ip net.IP) bool {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsMulticast() || ip.IsUnspecified() || ip.IsInterfaceLocalMulticast() || ip.Equal(net.IPv4bcast) {
		return true
	}
	for _, cidr := range []string{"100.64.0.0/10", "0.0.0.0/8", "64:ff9b::a00:0/104", "64:ff9b::7f00:0/104",
		"64:ff9b::a9fe:0/112", "64:ff9b::c0a8:0/112", "64:ff9b::ac10:0/108", "::/96"} {
		_, n, _ := net.ParseCIDR(cidr)
		if n.Contains(ip) {
			return true
		}
	}
	return false
}
