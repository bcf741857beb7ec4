package xaalis

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// SecretBox encrypts the secrets the database keeps: webhook endpoint
// secrets, callback secrets, and stored answers that show a secret
// (AES-256-GCM under the operator's key file; internal/secrets). The
// stores seal on write and open on read, so the domain only ever sees
// secrets in clear and the database never holds one.
type SecretBox interface {
	// Seal encrypts plaintext under the key id, bound to aad (the row it
	// belongs to: SecretAAD).
	Seal(keyID string, plaintext, aad []byte) (string, error)
	// Open decrypts a sealed value, under whichever of its keys sealed it.
	Open(sealed string, aad []byte) ([]byte, error)
	// Has reports whether the box holds a key.
	Has(keyID string) bool
	// Newest is the key a database without a current key starts with.
	Newest() string
}

// SealedPrefix starts every sealed value (internal/secrets.Prefix).
const SealedPrefix = "enc:v1:"

// IsSealed reports whether a stored value is sealed.
func IsSealed(v string) bool { return strings.HasPrefix(v, SealedPrefix) }

// SecretKeyIDLen is the length of a key id in a sealed value.
const SecretKeyIDLen = 16

// SealedKeyID returns the key id of a sealed value, "" for a value in
// clear.
func SealedKeyID(v string) string {
	if !IsSealed(v) || len(v) < len(SealedPrefix)+SecretKeyIDLen {
		return ""
	}
	return v[len(SealedPrefix) : len(SealedPrefix)+SecretKeyIDLen]
}

// SecretAAD is the additional data that binds a sealed value to its row:
// the table and the row's key, each part length-prefixed, so that a value
// copied to another row (another merchant's endpoint) does not decrypt.
func SecretAAD(table string, key ...string) []byte {
	var b []byte
	for _, p := range append([]string{table}, key...) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// Rows of sealed values.
const (
	SecretTableEndpoint    = "webhook_endpoints"
	SecretTableCallback    = "webhook_callback_secrets"
	SecretTableListen      = "webhook_listen_secrets"
	SecretTableIdempotency = "idempotency_keys"
)

// EndpointSecretAAD binds an endpoint's secrets to it.
func EndpointSecretAAD(endpointID string) []byte { return SecretAAD(SecretTableEndpoint, endpointID) }

// CallbackSecretAAD binds a callback secret to its merchant and mode.
func CallbackSecretAAD(merchantID string, mode Mode) []byte {
	return SecretAAD(SecretTableCallback, merchantID, string(mode))
}

// ListenSecretAAD binds a `xaalis listen` secret to its merchant and mode.
func ListenSecretAAD(merchantID string, mode Mode) []byte {
	return SecretAAD(SecretTableListen, merchantID, string(mode))
}

// IdempotencyAAD binds a stored answer to its Idempotency-Key.
func IdempotencyAAD(s IdempotencyScope) []byte {
	return SecretAAD(SecretTableIdempotency, s.MerchantID, string(s.Mode), string(s.KeyType), s.Key)
}

// SecretKeyUsage says which keys the stored secrets are under.
type SecretKeyUsage struct {
	// Current is the key new secrets are sealed under; "" until the first
	// secret is sealed.
	Current string
	// Sealed counts sealed values by key id.
	Sealed map[string]int
	// Clear counts secrets stored in clear (by a version before
	// encryption at rest, or by a store without a box).
	Clear int
}

// RevealsSecret is implemented by answers that show a secret (a new
// webhook endpoint, a rotated one): their stored copy for Idempotency-Key
// replays is sealed.
type RevealsSecret interface{ RevealsSecret() bool }

// RevealsSecret reports whether the endpoint record shows its secret.
func (w *WebhookEndpoint) RevealsSecret() bool { return w.ShowSecret }

// SealSecret seals a secret under the key id for storage; an empty secret
// stays empty, and without a box (tests) the secret is stored in clear.
func SealSecret(box SecretBox, keyID, plain string, aad []byte) (string, error) {
	if box == nil || plain == "" {
		return plain, nil
	}
	v, err := box.Seal(keyID, []byte(plain), aad)
	if err != nil {
		return "", fmt.Errorf("seal secret: %w", err)
	}
	return v, nil
}

// SealAnswer returns the body to store of an Idempotency-Key's answer:
// sealed under the key keyID names when the answer shows a secret (keyID
// is asked only then), as it is otherwise or without a box (tests).
func SealAnswer(box SecretBox, s IdempotencyScope, r StoredResponse, keyID func() (string, error)) ([]byte, error) {
	if !r.Secret || box == nil {
		return r.Body, nil
	}
	kid, err := keyID()
	if err != nil {
		return nil, err
	}
	sealed, err := box.Seal(kid, r.Body, IdempotencyAAD(s))
	if err != nil {
		return nil, fmt.Errorf("seal stored answer: %w", err)
	}
	return []byte(sealed), nil
}

// OpenSecret returns a stored secret in clear: opened when sealed, as it
// is when stored in clear (by an earlier version, or without a box).
func OpenSecret(box SecretBox, stored string, aad []byte) (string, error) {
	if !IsSealed(stored) {
		return stored, nil
	}
	if box == nil {
		return "", errors.New("open secret: it is encrypted at rest and no secret key file was given")
	}
	b, err := box.Open(stored, aad)
	if err != nil {
		return "", fmt.Errorf("open secret: %w", err)
	}
	return string(b), nil
}

// OpenEndpointSecrets turns an endpoint's stored secrets into clear ones.
func OpenEndpointSecrets(box SecretBox, w *WebhookEndpoint) error {
	aad := EndpointSecretAAD(w.ID)
	var err error
	if w.Secret, err = OpenSecret(box, w.Secret, aad); err != nil {
		return fmt.Errorf("webhook endpoint %s: %w", w.ID, err)
	}
	if w.PreviousSecret, err = OpenSecret(box, w.PreviousSecret, aad); err != nil {
		return fmt.Errorf("webhook endpoint %s: %w", w.ID, err)
	}
	return nil
}

// SealEndpointSecrets returns an endpoint's secrets sealed for storage.
func SealEndpointSecrets(box SecretBox, keyID string, w *WebhookEndpoint) (secret, previous string, err error) {
	aad := EndpointSecretAAD(w.ID)
	if secret, err = SealSecret(box, keyID, w.Secret, aad); err != nil {
		return "", "", err
	}
	if previous, err = SealSecret(box, keyID, w.PreviousSecret, aad); err != nil {
		return "", "", err
	}
	return secret, previous, nil
}

// SecretKeySetting names the setting that holds the id of the key new
// secrets are sealed under.
const SecretKeySetting = "secret_key"

// SecretRequiredKeys are the keys a box must hold to read the database:
// the current one and every one a stored secret is sealed under.
func (u SecretKeyUsage) SecretRequiredKeys() []string {
	var out []string
	if u.Current != "" {
		out = append(out, u.Current)
	}
	for id := range u.Sealed {
		if id != u.Current {
			out = append(out, id)
		}
	}
	slices.Sort(out[min(1, len(out)):])
	return out
}
