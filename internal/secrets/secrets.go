// Package secrets keeps the secrets Xaalis stores in its database (webhook
// signing secrets, callback secrets, stored answers that show one)
// encrypted at rest: AES-256-GCM under keys the operator holds in a key
// file, apart from the database, so that a copy of the database or of
// its backups signs nothing.
//
// A key file holds one or more keys, one a line, base64 (or hex) of 32
// random bytes; lines starting with # are comments. A file of exactly 32
// bytes of anything else is one raw key. Every key in the file
// decrypts. Which key encrypts is recorded in the database (xaalis
// secrets rotate changes it), so that every server process on one
// database switches at once. A key's id is derived from the key itself,
// so a file can never name a key wrongly.
//
// A sealed value is "enc:v1:<key id>:<base64url(nonce | ciphertext)>",
// bound to the row it belongs to by its additional data.
package secrets

import (
	"bufio"
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Prefix starts every sealed value.
const Prefix = xaalis.SealedPrefix

// KeyIDLen is the length of a key id (hex).
const KeyIDLen = xaalis.SecretKeyIDLen

var _ xaalis.SecretBox = (*Keyring)(nil)

// KeyID is the id of a key: the first 8 bytes of a SHA-256 of it, in hex.
func KeyID(key []byte) string {
	sum := sha256.Sum256(append([]byte("xaalis secret key\x00"), key...))
	return hex.EncodeToString(sum[:KeyIDLen/2])
}

// IsSealed reports whether a stored value is sealed (rather than a secret
// stored in clear by an earlier version).
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// KeyIDOf returns the id of the key a sealed value is under.
func KeyIDOf(v string) (string, bool) {
	if !IsSealed(v) || len(v) < len(Prefix)+KeyIDLen+1 || v[len(Prefix)+KeyIDLen] != ':' {
		return "", false
	}
	return v[len(Prefix) : len(Prefix)+KeyIDLen], true
}

// ErrUnknownKey: a value is sealed under a key the key file does not hold.
var ErrUnknownKey = errors.New("secret key not in the key file")

// Keyring is the keys of a key file. It reads the file again when asked
// for a key it does not hold, so that a server picks up a key added to its
// file (xaalis secrets rotate) without a restart.
type Keyring struct {
	path string

	mu    sync.RWMutex
	keys  map[string]cipher.AEAD
	order []string // ids in file order
	stamp fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Load reads a key file. It fails when the file is missing, unreadable,
// holds no key, or a line is not a 32-byte key.
func Load(path string) (*Keyring, error) {
	k := &Keyring{path: path}
	if err := k.reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Create writes a new key file holding one fresh key (mode 0600) and
// loads it. It fails when the file exists.
func Create(path string) (*Keyring, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create key file directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create key file: %w", err)
	}
	_, line := newKeyLine()
	_, werr := f.WriteString(header + line)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("write key file %s: %w", path, err)
	}
	return Load(path)
}

const header = `# Xaalis secret keys: AES-256, base64, one a line. Every key here decrypts;
# the database records which one encrypts (xaalis secrets status). Keep this
# file apart from the database and its backups, and never lose it: the
# secrets it encrypts cannot be read without it.
`

func newKeyLine() ([]byte, string) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("secrets: crypto/rand: " + err.Error())
	}
	return key, fmt.Sprintf("# key %s, added %s\n%s\n", KeyID(key), time.Now().UTC().Format(time.RFC3339),
		base64.StdEncoding.EncodeToString(key))
}

// AddKey appends a fresh key to the key file at path, creating the file
// when it does not exist, and returns the new key's id. The file is
// replaced whole (written beside it, then renamed), so that a reader never
// sees half of it. The new key does not encrypt until the database is
// told to use it. A path that is a symbolic link has its target replaced,
// not the link: a key file linked from elsewhere (configuration
// management, a mounted secret) became a plain file the servers reading
// the target never saw, and they could then read none of the secrets
// encrypted under the new key.
func AddKey(path string) (string, error) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return "", fmt.Errorf("key file %s is a link that leads to no file: %w", path, err)
		}
		path = target
	}
	old, err := os.ReadFile(path)
	mode := fs.FileMode(0o600)
	uid, gid, ownerKnown := 0, 0, false
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = []byte(header)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return "", fmt.Errorf("create key file directory: %w", err)
		}
	case err != nil:
		return "", fmt.Errorf("read key file: %w", err)
	default:
		if _, err := parse(old); err != nil {
			return "", fmt.Errorf("key file %s: %w", path, err)
		}
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
			uid, gid, ownerKnown = owner(st)
		}
	}
	if len(old) > 0 && old[len(old)-1] != '\n' {
		old = append(old, '\n')
	}
	key, line := newKeyLine()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".xaalis-key-*")
	if err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(append(old, line...))
	if err := errors.Join(werr, tmp.Chmod(mode), tmp.Sync(), tmp.Close()); err != nil {
		return "", fmt.Errorf("write key file: %w", err)
	}
	if ownerKnown && !ownedBy(tmp.Name(), uid, gid) {
		// The new file is the writer's (root's, under sudo): it keeps the
		// old one's owner and group, or the service that reads it through
		// its group (deployment.md: chgrp xaalis, chmod 640) could not.
		if err := os.Chown(tmp.Name(), uid, gid); err != nil {
			return "", fmt.Errorf("key file %s: keep its owner and group (%d:%d): %w", path, uid, gid, err)
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("replace key file: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		// The rename itself made durable: a crash does not bring back
		// the file without the key the database may be told to use.
		_ = d.Sync()
		d.Close()
	}
	return KeyID(key), nil
}

// ownedBy reports whether the file at path has owner uid and group gid
// already (then nothing needs changing, which an owner outside the group
// could not do).
func ownedBy(path string, uid, gid int) bool {
	st, err := os.Stat(path)
	if err != nil {
		return false
	}
	u, g, ok := owner(st)
	return ok && u == uid && g == gid
}

// parse reads the keys of a key file, in order. A file of exactly 32
// bytes that holds no key line is one raw key (head -c 32 /dev/urandom).
func parse(b []byte) ([][]byte, error) {
	keys, err := parseLines(b)
	if err != nil && len(b) == 32 {
		return [][]byte{bytes.Clone(b)}, nil
	}
	return keys, err
}

func parseLines(b []byte) ([][]byte, error) {
	var keys [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := decodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		keys = append(keys, key)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, errors.New("no key in the file (a key is 32 random bytes in base64, one a line)")
	}
	return keys, nil
}

func decodeKey(s string) ([]byte, error) {
	if len(s) == 64 {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("a key must be 32 bytes, this one is %d", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("not a key: expected 32 bytes in base64 (or 64 hex digits)")
}

// reload reads the file again.
func (k *Keyring) reload() error {
	st, err := os.Stat(k.path)
	if err != nil {
		return fmt.Errorf("secret key file: %w", err)
	}
	b, err := os.ReadFile(k.path)
	if err != nil {
		return fmt.Errorf("secret key file: %w", err)
	}
	raw, err := parse(b)
	if err != nil {
		return fmt.Errorf("secret key file %s: %w", k.path, err)
	}
	keys := make(map[string]cipher.AEAD, len(raw))
	var order []string
	for _, key := range raw {
		block, err := aes.NewCipher(key)
		if err != nil {
			return err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return err
		}
		id := KeyID(key)
		if _, dup := keys[id]; !dup {
			order = append(order, id)
		}
		keys[id] = aead
	}
	k.mu.Lock()
	k.keys, k.order, k.stamp = keys, order, fileStamp{st.ModTime(), st.Size()}
	k.mu.Unlock()
	return nil
}

// refresh reads the file again if it changed since it was read.
func (k *Keyring) refresh() {
	st, err := os.Stat(k.path)
	if err != nil {
		return
	}
	k.mu.RLock()
	same := k.stamp == fileStamp{st.ModTime(), st.Size()}
	k.mu.RUnlock()
	if !same {
		_ = k.reload()
	}
}

// aead returns a key by id, reading the file again once when it is not
// known.
func (k *Keyring) aead(id string) (cipher.AEAD, error) {
	k.mu.RLock()
	a := k.keys[id]
	k.mu.RUnlock()
	if a != nil {
		return a, nil
	}
	k.refresh()
	k.mu.RLock()
	a = k.keys[id]
	k.mu.RUnlock()
	if a == nil {
		return nil, fmt.Errorf("%w: key %s is not in %s", ErrUnknownKey, id, k.path)
	}
	return a, nil
}

// WorldReadable reports whether others than the file's owner and group
// may read the key file.
func (k *Keyring) WorldReadable() bool {
	st, err := os.Stat(k.path)
	return err == nil && st.Mode().Perm()&0o007 != 0
}

// Path is the key file's path.
func (k *Keyring) Path() string { return k.path }

// IDs are the ids of the file's keys, in file order.
func (k *Keyring) IDs() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return slices.Clone(k.order)
}

// Newest is the id of the file's last key.
func (k *Keyring) Newest() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.order[len(k.order)-1]
}

// Has reports whether the file holds a key, reading it again if need be.
func (k *Keyring) Has(id string) bool {
	_, err := k.aead(id)
	return err == nil
}

// Seal encrypts plaintext under the key id, bound to aad.
func (k *Keyring) Seal(id string, plaintext, aad []byte) (string, error) {
	a, err := k.aead(id)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, a.NonceSize(), a.NonceSize()+len(plaintext)+a.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := a.Seal(nonce, nonce, plaintext, aad)
	return Prefix + id + ":" + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open decrypts a sealed value bound to aad. It fails with ErrUnknownKey
// when the key file does not hold its key, and with an error naming the
// key when the value was changed or belongs to another row.
func (k *Keyring) Open(sealed string, aad []byte) ([]byte, error) {
	id, ok := KeyIDOf(sealed)
	if !ok {
		return nil, errors.New("not a sealed value")
	}
	a, err := k.aead(id)
	if err != nil {
		return nil, err
	}
	raw, err := base64.RawURLEncoding.DecodeString(sealed[len(Prefix)+KeyIDLen+1:])
	if err != nil || len(raw) < a.NonceSize()+a.Overhead() {
		return nil, fmt.Errorf("sealed value under key %s is malformed", id)
	}
	plain, err := a.Open(nil, raw[:a.NonceSize()], raw[a.NonceSize():], aad)
	if err != nil {
		return nil, fmt.Errorf("sealed value under key %s does not decrypt: changed, or moved from another row", id)
	}
	return plain, nil
}
