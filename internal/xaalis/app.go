package xaalis

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Clock tells the time; tests drive it.
type Clock func() time.Time

// IDGen makes identifiers; tests may make them predictable.
type IDGen func() string

// NewUUIDv7 makes a time-ordered UUID, which keeps index inserts local.
func NewUUIDv7() string { return uuid.Must(uuid.NewV7()).String() }

// App holds the domain's commands and queries over a Store.
type App struct {
	Store Store
	Now   Clock
	NewID IDGen
	// LiveOnly makes an installation without test mode: test keys answer
	// test_key_in_production.
	LiveOnly bool
	// Config holds providers, fees, limits and rates.
	Config *Config
	// Gateway reaches the providers.
	Gateway Gateway
	// BaseURL is the public address of the API, for payment URLs and
	// provider notification URLs.
	BaseURL string
	// CheckWebhookURL applies the webhook URL rules to endpoints and
	// callback URLs; nil checks nothing beyond the URL's form.
	CheckWebhookURL URLChecker
	// MaxRedeliver bounds the events one redelivery by filter sends again;
	// 0 is MaxRedeliverEvents.
	MaxRedeliver int

	// replays counts idempotent replays not yet flushed (CountReplay).
	replays atomic.Int64
	// inFlight is the limit volume of the payments being created
	// (reserveLimits).
	inFlight limitsInFlight

	pepperOnce sync.Once
	pepper     []byte
	pepperErr  error

	// inst is this App's server instance (StartInstance), if any.
	inst instanceState
}

// NewApp returns an App with the real clock and UUIDv7 identifiers.
func NewApp(s Store) *App {
	cfg, err := ParseConfig(defaultConfig)
	if err != nil {
		panic("xaalis: embedded defaults.json: " + err.Error())
	}
	return &App{Store: s, Now: func() time.Time { return time.Now().UTC() }, NewID: NewUUIDv7, Config: cfg,
		BaseURL: "http://localhost:8080"}
}

func (a *App) now() time.Time { return a.Now().UTC().Truncate(time.Microsecond) }

func (a *App) keyPepper(ctx context.Context) ([]byte, error) {
	a.pepperOnce.Do(func() { a.pepper, a.pepperErr = a.Store.Pepper(ctx) })
	if a.pepperErr != nil {
		err := a.pepperErr
		a.pepperOnce = sync.Once{} // a failed read is retried on the next call
		return nil, fmt.Errorf("read pepper: %w", err)
	}
	return a.pepper, nil
}

// Principal is who a request acts as: a merchant through one key, from a
// client address.
type Principal struct {
	Merchant *Merchant
	Key      *Key
	// ClientIP is the address the request came from: publishable keys
	// are rate-limited by it.
	ClientIP netip.Addr
}

// Mode is the key's mode: it decides which objects the request reaches.
func (p *Principal) Mode() Mode { return p.Key.Mode }

// Authenticate checks a presented key from a client address. It returns
// test_key_in_production, invalid_api_key (unknown, revoked, expired) or
// ip_not_allowed (outside the key's or the merchant's allowlist).
func (a *App) Authenticate(ctx context.Context, secret string, ip netip.Addr) (*Principal, error) {
	p, _, err := a.AuthenticateIdempotent(ctx, secret, ip, "")
	return p, err
}

// AuthenticateIdempotent is Authenticate that also returns, from the same
// read, the Idempotency-Key idemKey of the principal's merchant, mode and
// key type: nil when there is none or idemKey is empty. The key's row is
// given only to a principal that passed every check.
func (a *App) AuthenticateIdempotent(ctx context.Context, secret string, ip netip.Addr, idemKey string) (*Principal, *IdempotencyRecord, error) {
	if a.LiveOnly && ClaimsTestMode(secret) {
		return nil, nil, E(ETestKeyInProduction)
	}
	if _, _, ok := ParseKeyPrefix(secret); !ok {
		return nil, nil, E(EInvalidAPIKey)
	}
	pepper, err := a.keyPepper(ctx)
	if err != nil {
		return nil, nil, err
	}
	hash := HashKey(pepper, secret)
	k, m, rec, err := a.Store.KeyByHash(ctx, hash, idemKey)
	if errors.Is(err, ErrNotFound) {
		return nil, nil, E(EInvalidAPIKey)
	} else if err != nil {
		return nil, nil, fmt.Errorf("find key: %w", err)
	}
	// The index lookup found the row by hash; the constant-time compare
	// keeps the final decision free of timing differences.
	if subtle.ConstantTimeCompare(k.Hash, hash) != 1 || !k.Usable(a.now()) {
		return nil, nil, E(EInvalidAPIKey)
	}
	if !IPAllowed(k.AllowIPs, ip) || !IPAllowed(m.AllowIPs, ip) {
		return nil, nil, E(EIPNotAllowed)
	}
	return &Principal{Merchant: m, Key: k, ClientIP: ip.Unmap()}, rec, nil
}

// MerchantCreate is what `xaalis merchant create` asks for.
type MerchantCreate struct {
	Name               string
	Country            Country
	SettlementCurrency Currency
	Status             MerchantStatus
	KYC                KYCStatus
}

// MerchantKeys are the four keys a new merchant gets, shown once.
type MerchantKeys struct {
	SecretTest      string `json:"secret_test"`
	PublishableTest string `json:"publishable_test"`
	SecretLive      string `json:"secret_live"`
	PublishableLive string `json:"publishable_live"`
}

// CreateMerchant creates a merchant and its four keys in one transaction.
// It returns validation_error for a bad name, country or currency.
func (a *App) CreateMerchant(ctx context.Context, in MerchantCreate) (*Merchant, MerchantKeys, error) {
	nm, err := a.newMerchant(ctx, in)
	if err != nil {
		return nil, MerchantKeys{}, err
	}
	err = a.update(ctx, func(tx Tx) error {
		if err := nm.insert(tx); err != nil {
			return err
		}
		return a.audit(ctx, tx, "merchant.create", "merchant", nm.m.ID, nil, merchantAudit(nm.m))
	})
	if err != nil {
		return nil, MerchantKeys{}, err
	}
	return nm.m, nm.keys, nil
}

// newMerchantRecords is a validated merchant and its keys, ready to insert.
type newMerchantRecords struct {
	ctx     context.Context
	m       *Merchant
	keyRecs []*Key
	keys    MerchantKeys
}

func (n *newMerchantRecords) insert(tx Tx) error {
	if err := tx.CreateMerchant(n.ctx, n.m); err != nil {
		return fmt.Errorf("insert merchant: %w", err)
	}
	for _, k := range n.keyRecs {
		if err := tx.CreateKey(n.ctx, k); err != nil {
			return fmt.Errorf("insert key: %w", err)
		}
	}
	return nil
}

func (a *App) newMerchant(ctx context.Context, in MerchantCreate) (*newMerchantRecords, error) {
	v := ValidationErrors{}
	in.Name = checkMerchantName(v, in.Name)
	// As a payment's country is read: either case, spaces trimmed.
	in.Country = Country(strings.ToUpper(strings.TrimSpace(string(in.Country))))
	if in.Country == "" {
		in.Country = "SN"
	}
	if !in.Country.Valid() {
		v.Add("country", "must be one of SN, CI, ML, BF, TG, BJ, NE, GW")
	}
	if in.SettlementCurrency == "" {
		in.SettlementCurrency = XOF
	}
	if !in.SettlementCurrency.Valid() {
		v.Add("settlement_currency", "must be one of XOF, EUR, USD")
	}
	if in.Status == "" {
		in.Status = MerchantActive
	}
	if !in.Status.Valid() {
		v.Add("status", "must be active, suspended, pending or closed")
	}
	if in.KYC == "" {
		in.KYC = KYCPending
	}
	if !in.KYC.Valid() {
		v.Add("kyc", "must be pending, approved or rejected")
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	pepper, err := a.keyPepper(ctx)
	if err != nil {
		return nil, err
	}
	now := a.now()
	n := &newMerchantRecords{ctx: ctx, m: &Merchant{
		ID: a.NewID(), Name: in.Name, Country: in.Country, SettlementCurrency: in.SettlementCurrency,
		Status: in.Status, KYC: in.KYC, PayoutsEnabled: true, CreatedAt: now, UpdatedAt: now,
	}}
	for _, k := range []struct {
		t   KeyType
		m   Mode
		dst *string
	}{
		{KeySecret, ModeTest, &n.keys.SecretTest}, {KeyPublishable, ModeTest, &n.keys.PublishableTest},
		{KeySecret, ModeLive, &n.keys.SecretLive}, {KeyPublishable, ModeLive, &n.keys.PublishableLive},
	} {
		key, secret := NewKey(a.NewID(), n.m.ID, k.t, k.m, AllScopes, nil, nil, pepper, now)
		n.keyRecs = append(n.keyRecs, key)
		*k.dst = secret
	}
	return n, nil
}

// UpdateMerchant changes a merchant as an operator asks. It returns
// not_found or validation_error.
func (a *App) UpdateMerchant(ctx context.Context, id string, u MerchantUpdate) (*Merchant, error) {
	v := ValidationErrors{}
	if u.Status != nil && !u.Status.Valid() {
		v.Add("status", "must be active, suspended, pending or closed")
	}
	if u.KYC != nil && !u.KYC.Valid() {
		v.Add("kyc", "must be pending, approved or rejected")
	}
	if u.Name != nil {
		name := checkMerchantName(v, *u.Name) // as at creation
		u.Name = &name
	}
	if u.AllowedProviders != nil {
		var list []string
		for _, p := range *u.AllowedProviders {
			if !ValidProvider(p) {
				v.Add("allowed_providers", fmt.Sprintf("%q is not a provider (channel_a, channel_b, channel_c)", p))
			} else if !slices.Contains(list, p) {
				list = append(list, p)
			}
		}
		u.AllowedProviders = &list
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var out *Merchant
	err := a.update(ctx, func(tx Tx) error {
		m, err := tx.MerchantForUpdate(ctx, id)
		if err != nil {
			return err
		}
		before := *m
		u.Apply(m)
		if reflect.DeepEqual(withoutEmptyLists(before), withoutEmptyLists(*m)) {
			out = m // nothing changes: no write, no audit entry
			return nil
		}
		m.UpdatedAt = a.now()
		if err := tx.UpdateMerchant(ctx, m); err != nil {
			return fmt.Errorf("update merchant: %w", err)
		}
		out = m
		return a.audit(ctx, tx, "merchant.update", "merchant", m.ID, merchantAudit(&before), merchantAudit(m))
	})
	return out, err
}

// checkMerchantName adds name's faults to v and returns it trimmed: what
// a merchant is called is never blank, at most 200 characters, and holds
// no control character.
func checkMerchantName(v ValidationErrors, name string) string {
	name = strings.TrimSpace(name)
	if name == "" || utf8.RuneCountInString(name) > 200 {
		v.Add("name", "is required, at most 200 characters")
	}
	checkText(v, "name", name, false)
	return name
}

// withoutEmptyLists is m with its empty lists nil, so that an update that
// empties an empty list changes nothing (UpdateMerchant).
func withoutEmptyLists(m Merchant) Merchant {
	if len(m.AllowedProviders) == 0 {
		m.AllowedProviders = nil
	}
	if len(m.AllowIPs) == 0 {
		m.AllowIPs = nil
	}
	if len(m.ReturnHosts) == 0 {
		m.ReturnHosts = nil
	}
	return m
}

// Providers are the three provider values of the specification.
var Providers = []string{"channel_a", "channel_b", "channel_c"}

// ValidProvider reports whether p is one of Providers.
func ValidProvider(p string) bool {
	for _, k := range Providers {
		if k == p {
			return true
		}
	}
	return false
}

// KeyCreate is what `xaalis key create` asks for.
type KeyCreate struct {
	MerchantID string
	Mode       Mode
	Type       KeyType
	Scopes     []Scope // nil: all scopes
	AllowIPs   []netip.Prefix
	ExpiresAt  *time.Time
}

// CreateKey issues a key and returns it with its secret, shown once. It
// returns not_found for an unknown merchant and validation_error.
func (a *App) CreateKey(ctx context.Context, in KeyCreate) (*Key, string, error) {
	v := ValidationErrors{}
	if !in.Mode.Valid() {
		v.Add("mode", "must be test or live")
	}
	if !in.Type.Valid() {
		v.Add("type", "must be secret or publishable")
	}
	var scopes []Scope
	for _, s := range in.Scopes {
		if !s.Valid() {
			v.Add("scopes", fmt.Sprintf("%q is not a scope", s))
		} else if !slices.Contains(scopes, s) {
			scopes = append(scopes, s) // a scope named twice is kept once
		}
	}
	if in.Scopes != nil {
		in.Scopes = append([]Scope{}, scopes...)
	}
	if in.Scopes == nil {
		in.Scopes = AllScopes
	}
	now := a.now()
	if in.ExpiresAt != nil && !in.ExpiresAt.After(now) {
		v.Add("expires_at", "must be in the future")
	}
	if err := v.Err(); err != nil {
		return nil, "", err
	}
	pepper, err := a.keyPepper(ctx)
	if err != nil {
		return nil, "", err
	}
	key, secret := NewKey(a.NewID(), in.MerchantID, in.Type, in.Mode, in.Scopes, in.AllowIPs, in.ExpiresAt, pepper, now)
	err = a.update(ctx, func(tx Tx) error {
		if _, err := tx.MerchantForUpdate(ctx, in.MerchantID); err != nil {
			return err
		}
		if err := tx.CreateKey(ctx, key); err != nil {
			return err
		}
		return a.audit(ctx, tx, "key.create", "api_key", key.ID, nil, keyAudit(key))
	})
	if err != nil {
		return nil, "", err
	}
	return key, secret, nil
}

// RevokeKey revokes a key at once. It returns not_found.
func (a *App) RevokeKey(ctx context.Context, id string) (*Key, error) {
	var out *Key
	err := a.update(ctx, func(tx Tx) error {
		k, err := tx.KeyForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if k.RevokedAt == nil {
			before := keyAudit(k)
			now := a.now()
			k.RevokedAt = &now
			if err := tx.RevokeKey(ctx, id, now); err != nil {
				return fmt.Errorf("revoke key: %w", err)
			}
			if err := a.audit(ctx, tx, "key.revoke", "api_key", k.ID, before, keyAudit(k)); err != nil {
				return err
			}
		}
		out = k
		return nil
	})
	return out, err
}

// DemoMerchant is the merchant `xaalis serve` makes on an empty database.
type DemoMerchant struct {
	Merchant *Merchant
	Keys     MerchantKeys
}

// EnsureDemoMerchant creates an active test-mode demo merchant when the
// database has no merchant and never had a demo one; it returns nil when
// nothing was created. The check, the marker and the merchant commit
// together, so two processes starting at once create exactly one.
func (a *App) EnsureDemoMerchant(ctx context.Context) (*DemoMerchant, error) {
	nm, err := a.newMerchant(ctx, MerchantCreate{Name: "Demo Merchant", Country: "SN", SettlementCurrency: XOF})
	if err != nil {
		return nil, err
	}
	var created bool
	err = a.update(ctx, func(tx Tx) error {
		exists, err := tx.AnyMerchant(ctx)
		if err != nil || exists {
			return err
		}
		if created, err = tx.InsertSettingOnce(ctx, "demo_merchant", []byte(nm.m.ID)); err != nil || !created {
			return err
		}
		return nm.insert(tx)
	})
	if err != nil || !created {
		return nil, err
	}
	return &DemoMerchant{Merchant: nm.m, Keys: nm.keys}, nil
}

// merchantAudit is what the audit log keeps of a merchant.
func merchantAudit(m *Merchant) map[string]any {
	ips := make([]string, len(m.AllowIPs))
	for i, p := range m.AllowIPs {
		ips[i] = p.String()
	}
	return map[string]any{"id": m.ID, "name": m.Name, "country": m.Country, "status": m.Status, "kyc": m.KYC,
		"allowed_providers": m.AllowedProviders, "allow_ips": ips, "return_hosts": m.ReturnHosts,
		"payouts_enabled": m.PayoutsEnabled}
}

// keyAudit is what the audit log keeps of a key: never its hash.
func keyAudit(k *Key) map[string]any {
	out := map[string]any{"id": k.ID, "merchant_id": k.MerchantID, "mode": k.Mode, "type": k.Type,
		"prefix": k.Prefix, "last4": k.Last4, "scopes": k.Scopes}
	if len(k.AllowIPs) > 0 {
		// What a key may be used from is part of what was granted.
		ips := make([]string, len(k.AllowIPs))
		for i, p := range k.AllowIPs {
			ips[i] = p.String()
		}
		out["allow_ips"] = ips
	}
	if k.ExpiresAt != nil {
		out["expires_at"] = Timestamp(*k.ExpiresAt)
	}
	if k.RevokedAt != nil {
		out["revoked_at"] = Timestamp(*k.RevokedAt)
	}
	return out
}
