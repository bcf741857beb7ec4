package xaalis

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
	"time"
)

//go:embed defaults.json
var defaultConfig []byte

// DefaultConfigJSON is the embedded configuration, for docs and tools.
func DefaultConfigJSON() []byte { return slices.Clone(defaultConfig) }

// Config is the business configuration: providers and their routes, fee
// grids, limits, BCEAO ceilings and exchange rates. It is JSON, with
// embedded defaults (internal/xaalis/defaults.json); --config replaces it.
type Config struct {
	Providers map[string]ProviderSpec `json:"providers"`
	// Fees are per provider and country; a pair without a grid answers
	// fees_unavailable.
	Fees []FeeGrid `json:"fees"`
	// MerchantLimits apply to every merchant unless MerchantOverrides has
	// the merchant's id.
	MerchantLimits    Limits            `json:"merchant_limits"`
	MerchantOverrides map[string]Limits `json:"merchant_overrides"`
	// BCEAO holds the payer ceilings over a rolling 30 days per phone.
	BCEAO BCEAOConfig `json:"bceao"`
	// FXRates maps "FROM/TO" to a decimal rate: one unit of FROM is worth
	// rate units of TO. The reverse pair is derived.
	FXRates map[string]string `json:"fx_rates"`
	// WithdrawalFee prices a payout request (its provider and country are
	// ignored).
	WithdrawalFee FeeGrid `json:"withdrawal_fee"`
	// PaymentExpiry is the default lifetime of a payment (expires_in).
	PaymentExpirySeconds int `json:"payment_expiry_seconds"`
	// ReconcileAfterSeconds: a payment pending this long is polled.
	ReconcileAfterSeconds int `json:"reconcile_after_seconds"`
}

// ProviderSpec is what a provider can do, and how to reach it in live mode.
type ProviderSpec struct {
	Enabled    bool           `json:"enabled"`
	Countries  []Country      `json:"countries"`
	Payments   bool           `json:"payments"`
	Payouts    bool           `json:"payouts"`
	Refunds    bool           `json:"refunds"`
	NextAction NextActionType `json:"next_action"`
	// MinAmount is the provider's floor, in whole units of XOF.
	MinAmount int64 `json:"min_amount"`
	// DailyLimit is the most one merchant may collect through this
	// provider in a day, in whole units of XOF (daily_limit_exceeded).
	DailyLimit int64 `json:"daily_limit"`
	// SubMerchant: metadata.aggregated_merchant_id is passed on.
	SubMerchant bool `json:"sub_merchant"`
	// Routes reach the live provider, tried in order.
	Routes []RouteSpec `json:"routes"`
	// DisabledCountries turn the provider off in some countries only.
	DisabledCountries []Country `json:"disabled_countries"`
}

// RouteSpec is one way to reach a live provider.
type RouteSpec struct {
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
	// NotifySecret verifies the provider's notifications.
	NotifySecret string `json:"notify_secret"`
	TimeoutMS    int    `json:"timeout_ms"`
}

// Timeout is the route's request timeout (default 10 s).
func (r RouteSpec) Timeout() time.Duration {
	if r.TimeoutMS <= 0 {
		return 10 * time.Second
	}
	return time.Duration(r.TimeoutMS) * time.Millisecond
}

// Serves reports whether the provider is on and serves the country.
func (p ProviderSpec) Serves(c Country) bool {
	return slices.Contains(p.Countries, c)
}

// FeeGrid is a provider's fee in one country: Percent (in basis points,
// 150 = 1.5 %) of the amount plus Fixed whole units, at least Min.
type FeeGrid struct {
	Provider  string  `json:"provider"`
	Country   Country `json:"country"`
	PercentBP int64   `json:"percent_bp"`
	Fixed     int64   `json:"fixed"`
	Min       int64   `json:"min"`
}

// Fee computes the fee of amount under the grid, rounded up to the minor
// unit, in integers only.
func (g FeeGrid) Fee(a Amount) Amount {
	pct := (a.Minor*g.PercentBP + 9_999) / 10_000
	fee := pct + g.Fixed*100
	if fee < g.Min*100 {
		fee = g.Min * 100
	}
	return Amount{Minor: fee, Currency: a.Currency}
}

// Limits are a merchant's amount limits in whole units of XOF; 0 is none.
type Limits struct {
	MinAmount int64 `json:"min_amount"`
	MaxAmount int64 `json:"max_amount"`
	Daily     int64 `json:"daily"`
	Monthly   int64 `json:"monthly"`
}

// BCEAOConfig sets payer ceilings: a payer's tier comes from Phones when
// listed, else DefaultTier.
type BCEAOConfig struct {
	DefaultTier int            `json:"default_tier"`
	Tiers       []BCEAOTier    `json:"tiers"`
	Phones      map[string]int `json:"phones"`
}

// BCEAOTier is one tier's ceiling over a rolling 30 days, whole XOF units.
type BCEAOTier struct {
	Tier    int   `json:"tier"`
	Ceiling int64 `json:"ceiling"`
}

// LoadConfig reads a configuration file; "" is the embedded defaults.
func LoadConfig(path string) (*Config, error) {
	b := defaultConfig
	if path != "" {
		var err error
		if b, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("read config: %w", err)
		}
	}
	return ParseConfig(b)
}

// ParseConfig parses and checks a configuration.
func ParseConfig(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if err := c.check(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return &c, nil
}

func (c *Config) check() error {
	for name, p := range c.Providers {
		if !ValidProvider(name) {
			return fmt.Errorf("unknown provider %q", name)
		}
		for _, k := range p.Countries {
			if !k.Valid() {
				return fmt.Errorf("provider %s: unknown country %q", name, k)
			}
		}
		switch p.NextAction {
		case NextRedirect, NextOTP, NextUSSD:
		default:
			return fmt.Errorf("provider %s: next_action must be redirect, otp or ussd", name)
		}
		for _, r := range p.Routes {
			if r.Name == "" || r.BaseURL == "" {
				return fmt.Errorf("provider %s: every route needs a name and a base_url", name)
			}
		}
	}
	for _, f := range c.Fees {
		if _, ok := c.Providers[f.Provider]; !ok || !f.Country.Valid() || f.PercentBP < 0 || f.Fixed < 0 || f.Min < 0 {
			return fmt.Errorf("fee grid %s/%s is invalid", f.Provider, f.Country)
		}
	}
	for pair, rate := range c.FXRates {
		from, to, ok := strings.Cut(pair, "/")
		if !ok || !Currency(from).Valid() || !Currency(to).Valid() {
			return fmt.Errorf("fx rate %q: expected FROM/TO of known currencies", pair)
		}
		if r, ok := new(big.Rat).SetString(rate); !ok || r.Sign() <= 0 {
			return fmt.Errorf("fx rate %s = %q: expected a positive decimal", pair, rate)
		}
	}
	if c.PaymentExpirySeconds <= 0 {
		c.PaymentExpirySeconds = 1800
	}
	if c.ReconcileAfterSeconds <= 0 {
		c.ReconcileAfterSeconds = 300
	}
	return nil
}

// FeeGrid returns the grid of a provider in a country.
func (c *Config) FeeGrid(provider string, country Country) (FeeGrid, bool) {
	for _, f := range c.Fees {
		if f.Provider == provider && f.Country == country {
			return f, true
		}
	}
	return FeeGrid{}, false
}

// LimitsFor returns the limits of a merchant.
func (c *Config) LimitsFor(merchantID string) Limits {
	if l, ok := c.MerchantOverrides[merchantID]; ok {
		return l
	}
	return c.MerchantLimits
}

// Rate returns the exchange rate from one currency to another as an exact
// fraction. EUR/XOF is the fixed parity 655.957.
func (c *Config) Rate(from, to Currency) (*big.Rat, bool) {
	if from == to {
		return big.NewRat(1, 1), true
	}
	if s, ok := c.FXRates[string(from)+"/"+string(to)]; ok {
		r, _ := new(big.Rat).SetString(s)
		return r, true
	}
	if s, ok := c.FXRates[string(to)+"/"+string(from)]; ok {
		r, _ := new(big.Rat).SetString(s)
		return new(big.Rat).Inv(r), true
	}
	return nil, false
}
