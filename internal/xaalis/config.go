package xaalis

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/big"
	"net/netip"
	"net/url"
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
	// DisputeResponseSeconds is how long a merchant has to answer a
	// dispute before it is lost (0: DefaultDisputeResponseWindow).
	DisputeResponseSeconds int `json:"dispute_response_seconds"`
	// SubscriptionMaxAttempts: failed period payments in a row, across
	// periods until one succeeds, before a subscription expires (0:
	// DefaultSubscriptionMaxAttempts).
	SubscriptionMaxAttempts int `json:"subscription_max_attempts"`
	// SubscriptionRetrySeconds: the wait before a failed period's payment
	// is asked again (0: DefaultSubscriptionRetryDelay).
	SubscriptionRetrySeconds int `json:"subscription_retry_seconds"`
	// Publishable bounds what public keys may start.
	Publishable PublishableLimits `json:"publishable"`
}

// PublishableLimits bound the payments publishable keys create, which
// anyone who reads a merchant's page can do. The counts live in the
// database, so they hold across server processes. 0 takes the default; a
// negative value switches a limit off.
type PublishableLimits struct {
	// PerAddressPerMinute: payments publishable keys may create from one
	// client address (an IPv6 /64) in a minute, per merchant and mode
	// (default 20).
	PerAddressPerMinute int `json:"per_address_per_minute"`
	// PerPhonePerHour: payments made with publishable keys that one payer
	// phone may be given for on the hosted page in an hour, across every
	// merchant (default 5): each sends a prompt to the phone.
	PerPhonePerHour int `json:"per_phone_per_hour"`
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
	// Unavailable are the configured routes that cannot be used (see
	// RouteSpec); they are left out of Routes when the configuration is
	// parsed, so live mode never offers them.
	Unavailable []UnavailableRoute `json:"-"`
}

// LiveReady reports whether live mode can reach the provider at all.
func (p ProviderSpec) LiveReady() bool { return len(p.Routes) > 0 }

// RouteSpec is one way to reach a live provider. A route is usable only
// with both credentials; the provider emulator's published credentials
// (EmulatorAPIKey, EmulatorNotifySecret) only on a loopback base URL.
type RouteSpec struct {
	Name    string `json:"name"`
	BaseURL string `json:"base_url"`
	APIKey  string `json:"api_key"`
	// NotifySecret verifies the provider's notifications.
	NotifySecret string `json:"notify_secret"`
	TimeoutMS    int    `json:"timeout_ms"`
}

// UnavailableRoute is a configured live route that cannot be used, and why.
type UnavailableRoute struct {
	Provider string
	Route    string
	Reason   string
}

// EmulatorAPIKey is the provider emulator's API key for a provider. It is
// published (the emulator is for development), so a route accepts it only
// when its base URL is a loopback address.
func EmulatorAPIKey(provider string) string { return "emulator-" + provider }

// EmulatorNotifySecret is the emulator's notification secret for a
// provider; published, like EmulatorAPIKey.
func EmulatorNotifySecret(provider string) string { return "emulator-" + provider + "-notify" }

// isEmulatorCredential reports whether s is one of the emulator's published
// credentials.
func isEmulatorCredential(s string) bool { return strings.HasPrefix(s, "emulator-") }

// LoopbackURL reports whether a base URL names this machine: localhost or a
// loopback address.
func LoopbackURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// routeProblem says why a live route cannot be used; "" when it can.
func routeProblem(r RouteSpec) string {
	switch {
	case r.APIKey == "" && r.NotifySecret == "":
		return "no credentials (api_key and notify_secret) are configured"
	case r.APIKey == "":
		return "no api_key is configured"
	case r.NotifySecret == "":
		return "no notify_secret is configured"
	case (isEmulatorCredential(r.APIKey) || isEmulatorCredential(r.NotifySecret)) && !LoopbackURL(r.BaseURL):
		return "it carries the provider emulator's published credentials on a base URL that is not a loopback address"
	}
	return ""
}

// Timeout is the route's request timeout (default 10 s).
func (r RouteSpec) Timeout() time.Duration {
	if r.TimeoutMS <= 0 {
		return 10 * time.Second
	}
	return time.Duration(r.TimeoutMS) * time.Millisecond
}

// Serves reports whether the provider serves the country: one of its
// countries, not turned off (disabled_countries). Payouts asked of a
// disabled country were created and failed, where payments were refused.
func (p ProviderSpec) Serves(c Country) bool {
	return slices.Contains(p.Countries, c) && !slices.Contains(p.DisabledCountries, c)
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

// Fee computes the fee of an amount in XOF under the grid, rounded up to
// the minor unit, in integers only (Config.GridFee for any currency).
func (g FeeGrid) Fee(a Amount) Amount { return g.fee(a, g.Fixed*100, g.Min*100) }

// fee is the grid's percentage of a, plus fixed, at least floor: both in
// a's minor units.
func (g FeeGrid) fee(a Amount, fixed, floor int64) Amount {
	fee := (a.Minor*g.PercentBP+9_999)/10_000 + fixed
	if fee < floor {
		fee = floor
	}
	return Amount{Minor: fee, Currency: a.Currency}
}

// GridFee is g's fee on a: its percentage of a, plus its fixed part and at
// least its minimum. Those two are whole units of XOF, as every amount of
// the configuration: for an amount in EUR or USD they are converted at the
// configured rate (a 10 XOF minimum is 0.02 EUR, not 10 EUR).
func (c *Config) GridFee(g FeeGrid, a Amount) Amount {
	if a.Currency == XOF {
		return g.Fee(a)
	}
	rate, ok := c.Rate(XOF, a.Currency)
	if !ok {
		return g.Fee(a) // no such payment is priced: price refuses the currency
	}
	return g.fee(a, Convert(Units(g.Fixed, XOF), a.Currency, rate).Minor, Convert(Units(g.Min, XOF), a.Currency, rate).Minor)
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
		var usable []RouteSpec
		for _, r := range p.Routes {
			if r.Name == "" || r.BaseURL == "" {
				return fmt.Errorf("provider %s: every route needs a name and a base_url", name)
			}
			if why := routeProblem(r); why != "" {
				p.Unavailable = append(p.Unavailable, UnavailableRoute{Provider: name, Route: r.Name, Reason: why})
				continue
			}
			usable = append(usable, r)
		}
		p.Routes = usable
		c.Providers[name] = p
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
	// A negative duration or count is a mistake, not "the default":
	// refused, as 0 (the default) is not.
	var negative []string
	for _, f := range []struct {
		name string
		v    int
	}{
		{"payment_expiry_seconds", c.PaymentExpirySeconds}, {"reconcile_after_seconds", c.ReconcileAfterSeconds},
		{"dispute_response_seconds", c.DisputeResponseSeconds}, {"subscription_max_attempts", c.SubscriptionMaxAttempts},
		{"subscription_retry_seconds", c.SubscriptionRetrySeconds},
	} {
		if f.v < 0 {
			negative = append(negative, fmt.Sprintf("%s is %d", f.name, f.v))
		}
	}
	if len(negative) > 0 {
		return fmt.Errorf("%s: it must be at least 0 (0: the default)", strings.Join(negative, ", "))
	}
	if c.PaymentExpirySeconds == 0 {
		c.PaymentExpirySeconds = 1800
	}
	if c.ReconcileAfterSeconds == 0 {
		c.ReconcileAfterSeconds = 300
	}
	if c.Publishable.PerAddressPerMinute == 0 {
		c.Publishable.PerAddressPerMinute = 20
	}
	if c.Publishable.PerPhonePerHour == 0 {
		c.Publishable.PerPhonePerHour = 5
	}
	return nil
}

// DisputeResponseWindow is how long a merchant has to answer a dispute.
func (c *Config) DisputeResponseWindow() time.Duration {
	if c == nil || c.DisputeResponseSeconds <= 0 {
		return DefaultDisputeResponseWindow
	}
	return time.Duration(c.DisputeResponseSeconds) * time.Second
}

// SubscriptionAttempts is how many period payments in a row may fail,
// across periods, before the subscription expires.
func (c *Config) SubscriptionAttempts() int {
	if c == nil || c.SubscriptionMaxAttempts <= 0 {
		return DefaultSubscriptionMaxAttempts
	}
	return c.SubscriptionMaxAttempts
}

// SubscriptionRetryDelay is the wait before a failed period's payment is
// asked again.
func (c *Config) SubscriptionRetryDelay() time.Duration {
	if c == nil || c.SubscriptionRetrySeconds <= 0 {
		return DefaultSubscriptionRetryDelay
	}
	return time.Duration(c.SubscriptionRetrySeconds) * time.Second
}

// UnavailableRoutes lists the live routes that cannot be used, by
// provider and route name, for `xaalis serve` to say at start.
func (c *Config) UnavailableRoutes() []UnavailableRoute {
	var out []UnavailableRoute
	for _, p := range c.Providers {
		out = append(out, p.Unavailable...)
	}
	slices.SortFunc(out, func(a, b UnavailableRoute) int {
		return strings.Compare(a.Provider+"/"+a.Route, b.Provider+"/"+b.Route)
	})
	return out
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
