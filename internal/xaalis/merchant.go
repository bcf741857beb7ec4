package xaalis

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"
)

// MerchantStatus is the account status. Only active merchants move money.
type MerchantStatus string

// Merchant statuses of the specification.
const (
	MerchantActive    MerchantStatus = "active"
	MerchantSuspended MerchantStatus = "suspended"
	MerchantPending   MerchantStatus = "pending"
	MerchantClosed    MerchantStatus = "closed"
)

// Valid reports whether s is one of the four statuses.
func (s MerchantStatus) Valid() bool {
	switch s {
	case MerchantActive, MerchantSuspended, MerchantPending, MerchantClosed:
		return true
	}
	return false
}

// KYCStatus is the state of the merchant's know-your-customer review.
type KYCStatus string

// KYC statuses. Live mode needs KYCApproved.
const (
	KYCPending  KYCStatus = "pending"
	KYCApproved KYCStatus = "approved"
	KYCRejected KYCStatus = "rejected"
)

// Valid reports whether s is a known KYC status.
func (s KYCStatus) Valid() bool {
	switch s {
	case KYCPending, KYCApproved, KYCRejected:
		return true
	}
	return false
}

// Merchant is an account that collects and pays out money.
type Merchant struct {
	ID                 string
	Name               string
	Country            Country
	SettlementCurrency Currency
	Status             MerchantStatus
	KYC                KYCStatus
	// AllowedProviders is the provider whitelist; empty allows all.
	AllowedProviders []string
	// AllowIPs restricts every key of the account; empty allows all.
	AllowIPs []netip.Prefix
	// ReturnHosts are the hosts the success and failure URLs of a payment
	// made with a publishable key may point at (and the hosted page
	// returns to); empty: publishable keys cannot create payments.
	ReturnHosts    []string
	PayoutsEnabled bool
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// ActiveError returns merchant_inactive (context status) unless the
// merchant is active.
func (m *Merchant) ActiveError() error {
	if m.Status == MerchantActive {
		return nil
	}
	return E(EMerchantInactive, "status", string(m.Status))
}

// AllowsProvider reports whether the whitelist lets the provider through.
func (m *Merchant) AllowsProvider(p string) bool {
	return len(m.AllowedProviders) == 0 || slices.Contains(m.AllowedProviders, p)
}

// MerchantUpdate lists the fields an operator may change; nil leaves a
// field as it is.
type MerchantUpdate struct {
	Name             *string
	Status           *MerchantStatus
	KYC              *KYCStatus
	AllowedProviders *[]string
	AllowIPs         *[]netip.Prefix
	ReturnHosts      *[]string
	PayoutsEnabled   *bool
}

// Apply copies the set fields onto m.
func (u MerchantUpdate) Apply(m *Merchant) {
	if u.Name != nil {
		m.Name = *u.Name
	}
	if u.Status != nil {
		m.Status = *u.Status
	}
	if u.KYC != nil {
		m.KYC = *u.KYC
	}
	if u.AllowedProviders != nil {
		m.AllowedProviders = *u.AllowedProviders
	}
	if u.AllowIPs != nil {
		m.AllowIPs = *u.AllowIPs
	}
	if u.ReturnHosts != nil {
		m.ReturnHosts = *u.ReturnHosts
	}
	if u.PayoutsEnabled != nil {
		m.PayoutsEnabled = *u.PayoutsEnabled
	}
}

// IPAllowed reports whether ip is inside one of the prefixes; an empty
// list allows every address.
func IPAllowed(prefixes []netip.Prefix, ip netip.Addr) bool {
	if len(prefixes) == 0 {
		return true
	}
	ip = ip.Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParsePrefixes parses a list of CIDRs or bare addresses (a bare address
// is a /32 or /128).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		if s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, Errorf(EValidation, "%q is not a CIDR or IP address", s)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// ReturnHostAllowed reports whether a URL's host is one of the merchant's
// return hosts: the same name, case aside, on any port.
func (m *Merchant) ReturnHostAllowed(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return false
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range m.ReturnHosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return false
}

// ParseReturnHosts checks a list of host names (shop.example, no scheme,
// path or port) and returns them in lower case. It returns
// validation_error naming the first bad entry.
func ParseReturnHosts(list []string) ([]string, error) {
	out := []string{}
	for _, h := range list {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		u, err := url.Parse("https://" + h + "/")
		if err != nil || u.Hostname() != h || u.Port() != "" || len(h) > 253 || strings.ContainsAny(h, "/?#@*") {
			return nil, &Error{Code: EValidation, Fields: ValidationErrors{"return_hosts": {
				fmt.Sprintf("%q is not a host name (shop.example: no scheme, port or path)", h)}}}
		}
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	if len(out) > 20 {
		return nil, &Error{Code: EValidation, Fields: ValidationErrors{"return_hosts": {"at most 20 hosts"}}}
	}
	return out, nil
}

// MerchantChange is a merchant update as an operator writes it, in the
// operator API's JSON or the CLI's flags: words and lists, read by Update.
// A field left nil stays as it is.
type MerchantChange struct {
	Name             *string   `json:"name"`
	Status           *string   `json:"status"`
	KYC              *string   `json:"kyc"`
	AllowedProviders *[]string `json:"allowed_providers"`
	AllowIPs         *[]string `json:"allow_ips"`
	ReturnHosts      *[]string `json:"return_hosts"`
	PayoutsEnabled   *bool     `json:"payouts_enabled"`
}

// Update reads c: validation_error naming allow_ips or return_hosts when
// one of theirs is not an address or a host (UpdateMerchant checks the
// rest).
func (c MerchantChange) Update() (MerchantUpdate, error) {
	u := MerchantUpdate{Name: c.Name, AllowedProviders: c.AllowedProviders, PayoutsEnabled: c.PayoutsEnabled}
	if c.Status != nil {
		st := MerchantStatus(*c.Status)
		u.Status = &st
	}
	if c.KYC != nil {
		k := KYCStatus(*c.KYC)
		u.KYC = &k
	}
	if c.AllowIPs != nil {
		p, err := ParsePrefixes(*c.AllowIPs)
		var e *Error
		if errors.As(err, &e) {
			return u, &Error{Code: EValidation, Fields: ValidationErrors{"allow_ips": {e.Text()}}}
		} else if err != nil {
			return u, err
		}
		u.AllowIPs = &p
	}
	if c.ReturnHosts != nil {
		h, err := ParseReturnHosts(*c.ReturnHosts)
		if err != nil {
			return u, err
		}
		u.ReturnHosts = &h
	}
	return u, nil
}

// MerchantJSON is how the CLI and the operator API show a merchant.
func MerchantJSON(m *Merchant) map[string]any {
	ips := make([]string, len(m.AllowIPs))
	for i, p := range m.AllowIPs {
		ips[i] = p.String()
	}
	providers := m.AllowedProviders
	if providers == nil {
		providers = []string{}
	}
	hosts := m.ReturnHosts
	if hosts == nil {
		hosts = []string{}
	}
	return map[string]any{
		"id": m.ID, "object": "merchant", "name": m.Name, "country": m.Country,
		"settlement_currency": m.SettlementCurrency, "status": m.Status, "kyc": m.KYC,
		"allowed_providers": providers, "allow_ips": ips, "return_hosts": hosts, "payouts_enabled": m.PayoutsEnabled,
		"created_at": Timestamp(m.CreatedAt), "updated_at": Timestamp(m.UpdatedAt),
	}
}
