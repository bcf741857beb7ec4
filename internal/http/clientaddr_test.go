package http

import (
	"net/http"
	"net/netip"
	"testing"
)

func TestClientAddr(t *testing.T) {
	proxies, err := ParseTrustedProxies("127.0.0.1/32, 10.0.0.0/8,::1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		fwd        []string
		want       string
	}{
		{"no proxy: the peer", "198.51.100.9", nil, nil, "198.51.100.9"},
		{"an untrusted peer's header is ignored", "198.51.100.9", []string{"203.0.113.7"}, nil, "198.51.100.9"},
		{"a trusted peer without header", "127.0.0.1", nil, nil, "127.0.0.1"},
		{"one trusted hop", "127.0.0.1", []string{"203.0.113.7"}, nil, "203.0.113.7"},
		{"the client's own entries are never believed", "127.0.0.1", []string{"1.2.3.4, 203.0.113.7"}, nil, "203.0.113.7"},
		{"past every trusted hop", "127.0.0.1", []string{"1.2.3.4, 203.0.113.7, 10.1.2.3, 10.9.9.9"}, nil, "203.0.113.7"},
		{"several headers are one list", "127.0.0.1", []string{"1.2.3.4, 203.0.113.7", "10.1.2.3"}, nil, "203.0.113.7"},
		{"every hop trusted: the furthest", "127.0.0.1", []string{"10.1.2.3, 10.4.5.6"}, nil, "10.1.2.3"},
		{"a port", "127.0.0.1", []string{"203.0.113.7:4711"}, nil, "203.0.113.7"},
		{"IPv6 with port", "127.0.0.1", []string{"[2001:db8::7]:4711"}, nil, "2001:db8::7"},
		{"IPv6 in brackets", "127.0.0.1", []string{"[2001:db8::7]"}, nil, "2001:db8::7"},
		{"IPv4-mapped", "::ffff:127.0.0.1", []string{"::ffff:203.0.113.7"}, nil, "203.0.113.7"},
		{"garbage: the nearest trusted hop", "127.0.0.1", []string{"203.0.113.7, bogus, 10.1.2.3"}, nil, "10.1.2.3"},
		{"an empty entry", "127.0.0.1", []string{"203.0.113.7,"}, nil, "127.0.0.1"},
		{"a zone is no client", "127.0.0.1", []string{"fe80::1%eth0"}, nil, "127.0.0.1"},
		{"Forwarded", "127.0.0.1", nil, []string{`for=192.0.2.60;proto=http;by=203.0.113.43`}, "192.0.2.60"},
		{"Forwarded, IPv6 quoted with port", "127.0.0.1", nil, []string{`for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"Forwarded, right to left", "127.0.0.1", nil, []string{`for=1.2.3.4, For=203.0.113.7;proto=https, for=10.0.0.2`}, "203.0.113.7"},
		{"Forwarded, quoted commas stay in their element", "127.0.0.1", nil, []string{`for=203.0.113.7;x="a,b", for=10.0.0.2`}, "203.0.113.7"},
		{"Forwarded, unknown", "127.0.0.1", nil, []string{`for=unknown, for=10.0.0.2`}, "10.0.0.2"},
		{"Forwarded, obfuscated", "127.0.0.1", nil, []string{`for=_hidden`}, "127.0.0.1"},
		{"Forwarded, no for", "127.0.0.1", nil, []string{`proto=https`}, "127.0.0.1"},
		{"X-Forwarded-For wins over Forwarded", "127.0.0.1", []string{"203.0.113.7"}, []string{"for=198.51.100.1"}, "203.0.113.7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range c.xff {
				h.Add("X-Forwarded-For", v)
			}
			for _, v := range c.fwd {
				h.Add("Forwarded", v)
			}
			got := clientAddr(netip.MustParseAddr(c.peer).Unmap(), h, proxies)
			if got.String() != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
			// Without trusted proxies the headers never count.
			if got := clientAddr(netip.MustParseAddr(c.peer).Unmap(), h, nil); got != netip.MustParseAddr(c.peer).Unmap() {
				t.Fatalf("without --trusted-proxies: %s", got)
			}
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies(" 127.0.0.1/32,10.1.2.3/8 , ::1, 192.0.2.1, ::ffff:10.0.0.0/104,")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1/32", "10.0.0.0/8", "::1/128", "192.0.2.1/32", "10.0.0.0/8"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	for _, bad := range []string{"localhost", "10.0.0.0/33", "1.2.3", "fe80::1%eth0/64"} {
		if _, err := ParseTrustedProxies(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if got, err := ParseTrustedProxies(""); err != nil || len(got) != 0 {
		t.Fatalf("empty: %v %v", got, err)
	}
}

// FuzzClientAddr: no header, however forged, crashes the walk or yields an
// address that is neither the peer nor one the headers name; an untrusted
// peer is always the client.
func FuzzClientAddr(f *testing.F) {
	f.Add("127.0.0.1", "203.0.113.7, 10.0.0.1", "")
	f.Add("127.0.0.1", "", `for="[2001:db8::1]:80";proto=https, for=10.0.0.1`)
	f.Add("198.51.100.1", "1.1.1.1", "for=2.2.2.2")
	f.Add("127.0.0.1", `"`, `for="\"`)
	proxies, _ := ParseTrustedProxies("127.0.0.0/8,10.0.0.0/8")
	f.Fuzz(func(t *testing.T, peer, xff, fwd string) {
		p, err := netip.ParseAddr(peer)
		if err != nil {
			return
		}
		p = p.Unmap()
		h := http.Header{}
		if xff != "" {
			h.Set("X-Forwarded-For", xff)
		}
		if fwd != "" {
			h.Set("Forwarded", fwd)
		}
		got := clientAddr(p, h, proxies)
		if !got.IsValid() && p.IsValid() {
			t.Fatalf("no address for peer %s", p)
		}
		if !trusted(proxies, p) && got != p {
			t.Fatalf("untrusted peer %s: client %s", p, got)
		}
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("client %s has a zone or is mapped", got)
		}
	})
}
