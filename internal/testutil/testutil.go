// Package testutil holds small helpers the test suites share.
package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/xaalis/xaalis/internal/secrets"
)

// SyncBuffer collects output written from several goroutines (a server's
// logs while a test reads them).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Keyring makes a key file of one fresh key in a temporary directory of
// t and returns its keyring, to seal a test store's secrets.
func Keyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Create(filepath.Join(t.TempDir(), "secret.key"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var shared struct {
	once sync.Once
	k    *secrets.Keyring
	err  error
}

// SharedKeyring is one keyring for every store of a test binary, for
// tests where several stores (server processes) share one database. Its
// key file lives in the system's temporary directory.
func SharedKeyring(t testing.TB) *secrets.Keyring {
	t.Helper()
	shared.once.Do(func() {
		var dir string
		if dir, shared.err = os.MkdirTemp("", "xaalis-test-key-"); shared.err == nil {
			shared.k, shared.err = secrets.Create(filepath.Join(dir, "secret.key"))
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.k
}

// ChromiumPath is Debian's Chromium, which CI installs for the browser
// tests.
const ChromiumPath = "/usr/bin/chromium"

// NeedChromium skips a browser test on a machine without ChromiumPath. CI
// installs Chromium and fails when this skip shows in its log ("chromium
// not found").
func NeedChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(ChromiumPath); err != nil {
		t.Skipf("chromium not found at %s (%v): install Debian's chromium package to run the browser test", ChromiumPath, err)
	}
}

// ArtifactsDir is where a test leaves screenshots: $XAALIS_ARTIFACTS_DIR
// (kept by CI), else a temporary directory.
func ArtifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("XAALIS_ARTIFACTS_DIR")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
