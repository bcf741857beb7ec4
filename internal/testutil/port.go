package testutil

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
)

// FreePort returns a loopback port for a process that must be told its
// port before it listens (nginx, a Node receiver, a server restarted on
// the same address). A port the kernel picked for a listener on :0 and
// closed again could be given, before that process binds it, to a server
// another test starts on :0 or to an outgoing connection: both take their
// ports from the ephemeral range (ip_local_port_range). So the port is
// taken below that range, where only an explicit bind reaches, checked
// free, and never handed out twice by the test binary.
func FreePort(t testing.TB) int {
	t.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		fmt.Sscan(string(b), &low)
	}
	const first = 10000
	if low-first < 1000 {
		t.Fatalf("the ephemeral port range starts at %d: no room below it for a fixed port", low)
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		port := first + rand.IntN(low-first)
		if portsGiven[port] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // someone listens there
		}
		ln.Close()
		portsGiven[port] = true
		return port
	}
	t.Fatalf("no free port in %d-%d", first, low-1)
	return 0
}

// FreeAddr is FreePort as a loopback address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return "127.0.0.1:" + strconv.Itoa(FreePort(t))
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)
