package xaalis

import (
	"fmt"
	"slices"
	"sort"
)

// ProviderInfo is an entry of GET /v1/providers.
type ProviderInfo struct {
	ID         string         `json:"id"`
	Object     string         `json:"object"`
	Countries  []Country      `json:"countries"`
	Payments   bool           `json:"payments"`
	Payouts    bool           `json:"payouts"`
	Refunds    bool           `json:"refunds"`
	NextAction NextActionType `json:"next_action"`
	MinAmount  int64          `json:"min_amount"`
	Currency   Currency       `json:"currency"`
	// Healthy: at least one route can take a payment now.
	Healthy bool          `json:"healthy"`
	Routes  []RouteHealth `json:"routes"`
	// Allowed: the merchant's provider whitelist lets it through.
	Allowed  bool `json:"allowed"`
	Livemode bool `json:"livemode"`
}

// ProvidersFor lists the enabled providers for the principal's mode,
// optionally only those serving a country, with capabilities, health and
// whether the merchant's whitelist allows each. A provider serves the
// countries it is configured for, not disabled, and priced (a fee grid).
func (a *App) ProvidersFor(p *Principal, country Country) []ProviderInfo {
	names := make([]string, 0, len(a.Config.Providers))
	for n := range a.Config.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []ProviderInfo{}
	for _, n := range names {
		spec := a.Config.Providers[n]
		if !spec.Enabled {
			continue
		}
		var countries []Country
		for _, c := range spec.Countries {
			// Without a fee grid there, nothing can be paid or paid out
			// (fees_unavailable): the provider is not open in that country.
			if _, priced := a.Config.FeeGrid(n, c); priced && !slices.Contains(spec.DisabledCountries, c) && (country == "" || c == country) {
				countries = append(countries, c)
			}
		}
		if len(countries) == 0 {
			continue
		}
		info := ProviderInfo{ID: n, Object: "provider", Countries: countries, Payments: spec.Payments,
			Payouts: spec.Payouts, Refunds: spec.Refunds, NextAction: spec.NextAction, MinAmount: spec.MinAmount,
			Currency: XOF, Allowed: p.Merchant.AllowsProvider(n), Livemode: p.Mode().Live(), Routes: []RouteHealth{}}
		if a.Gateway != nil {
			if h := a.Gateway.Health(p.Mode(), n); h != nil {
				info.Routes = h
			}
		}
		for _, r := range info.Routes {
			info.Healthy = info.Healthy || r.Healthy
		}
		out = append(out, info)
	}
	return out
}

// liveUnconfigured is the provider_unavailable of a provider that live
// mode cannot reach: none of its routes has usable credentials.
func liveUnconfigured(provider string) *Error {
	e := E(EProviderUnavailable, "provider", provider)
	e.Message = fmt.Sprintf("The provider %s is not configured for live mode: none of its routes has usable credentials.", provider)
	return e
}
