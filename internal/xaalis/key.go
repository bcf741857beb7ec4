package xaalis

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"net/netip"
	"slices"
	"strings"
	"time"
)

// Mode separates test objects from live ones. A key carries its mode.
type Mode string

// The two modes.
const (
	ModeTest Mode = "test"
	ModeLive Mode = "live"
)

// Valid reports whether m is test or live.
func (m Mode) Valid() bool { return m == ModeTest || m == ModeLive }

// Live reports whether objects of this mode are live (the livemode field).
func (m Mode) Live() bool { return m == ModeLive }

// KeyType is secret (sk_, server side only) or publishable (pk_).
type KeyType string

// Key types.
const (
	KeySecret      KeyType = "secret"
	KeyPublishable KeyType = "publishable"
)

// Valid reports whether t is a known key type.
func (t KeyType) Valid() bool { return t == KeySecret || t == KeyPublishable }

// Scope is a permission carried by a secret key.
type Scope string

// Scopes of the specification. A new secret key gets all three unless told
// otherwise.
const (
	ScopeReadTransactions Scope = "can_read_transactions"
	ScopeInitiatePayment  Scope = "can_initiate_payment"
	ScopePayout           Scope = "can_payout"
)

// AllScopes is every scope, in a stable order.
var AllScopes = []Scope{ScopeReadTransactions, ScopeInitiatePayment, ScopePayout}

// Valid reports whether s is a known scope.
func (s Scope) Valid() bool { return slices.Contains(AllScopes, s) }

// Key is an API key. The secret itself is never stored: only its keyed
// hash, so a leaked database reveals no usable key.
type Key struct {
	ID         string
	MerchantID string
	Mode       Mode
	Type       KeyType
	Hash       []byte
	// Prefix is the first characters of the secret (type, mode and four
	// random characters) and Last4 its last four, shown to tell keys apart.
	Prefix    string
	Last4     string
	Scopes    []Scope
	AllowIPs  []netip.Prefix
	ExpiresAt *time.Time
	RevokedAt *time.Time
	CreatedAt time.Time
}

// HasScope reports whether the key carries s. Publishable keys carry none.
func (k *Key) HasScope(s Scope) bool { return k.Type == KeySecret && slices.Contains(k.Scopes, s) }

// Usable reports whether the key is neither revoked nor expired at now.
func (k *Key) Usable(now time.Time) bool {
	if k.RevokedAt != nil && !k.RevokedAt.After(now) {
		return false
	}
	if k.ExpiresAt != nil && !k.ExpiresAt.After(now) {
		return false
	}
	return true
}

const keyAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// keyRandomLen characters of base62 carry about 190 bits.
const keyRandomLen = 32

// KeyPrefix is the textual prefix of a key of this type and mode, such as
// "sk_test_".
func KeyPrefix(t KeyType, m Mode) string {
	p := "sk_"
	if t == KeyPublishable {
		p = "pk_"
	}
	return p + string(m) + "_"
}

// ParseKeyPrefix reads the type and mode a secret claims by its prefix.
func ParseKeyPrefix(secret string) (KeyType, Mode, bool) {
	for _, t := range []KeyType{KeySecret, KeyPublishable} {
		for _, m := range []Mode{ModeTest, ModeLive} {
			p := KeyPrefix(t, m)
			if strings.HasPrefix(secret, p) && len(secret) == len(p)+keyRandomLen {
				return t, m, true
			}
		}
	}
	return "", "", false
}

// ClaimsTestMode reports whether a presented key says it is a test key,
// whatever else is wrong with it.
func ClaimsTestMode(secret string) bool {
	return strings.HasPrefix(secret, "sk_test_") || strings.HasPrefix(secret, "pk_test_")
}

// RandomString returns n characters of base62 from crypto/rand.
func RandomString(n int, alphabet string) string {
	b := make([]byte, n)
	// Rejection sampling keeps every character equally likely. The limit
	// is an int: for an alphabet whose size divides 256 it is 256, which a
	// byte cannot hold.
	limit := 256 - 256%len(alphabet)
	buf := make([]byte, n+16)
	for i := 0; i < n; {
		if _, err := rand.Read(buf); err != nil {
			panic("xaalis: crypto/rand: " + err.Error())
		}
		for _, c := range buf {
			if int(c) >= limit {
				continue
			}
			b[i] = alphabet[int(c)%len(alphabet)]
			i++
			if i == n {
				break
			}
		}
	}
	return string(b)
}

// NewKeySecret makes a new secret of this type and mode.
func NewKeySecret(t KeyType, m Mode) string {
	return KeyPrefix(t, m) + RandomString(keyRandomLen, keyAlphabet)
}

// HashKey is the keyed hash (HMAC-SHA256 under the installation's pepper)
// under which a key is stored and looked up.
func HashKey(pepper []byte, secret string) []byte {
	h := hmac.New(sha256.New, pepper)
	h.Write([]byte(secret))
	return h.Sum(nil)
}

// NewKey builds the record of a new key and returns it with its secret,
// which is shown once and never stored.
func NewKey(id, merchantID string, t KeyType, m Mode, scopes []Scope, allow []netip.Prefix, expires *time.Time, pepper []byte, now time.Time) (*Key, string) {
	secret := NewKeySecret(t, m)
	if t == KeyPublishable {
		scopes = nil
	}
	p := KeyPrefix(t, m)
	return &Key{
		ID:         id,
		MerchantID: merchantID,
		Mode:       m,
		Type:       t,
		Hash:       HashKey(pepper, secret),
		Prefix:     secret[:len(p)+4],
		Last4:      secret[len(secret)-4:],
		Scopes:     scopes,
		AllowIPs:   allow,
		ExpiresAt:  expires,
		CreatedAt:  now,
	}, secret
}
