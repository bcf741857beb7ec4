package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/ledger"
)

// SeedSpec describes payments written in bulk by `xaalis bench`.
type SeedSpec struct {
	MerchantID string
	Mode       Mode      // ModeTest in the bench
	N          int       // how many payments
	Amount     Amount    // each payment's amount (XOF)
	Fee        Amount    // each payment's fee, as the business configuration prices it
	Provider   string    // e.g. "channel_a"
	Country    Country   // e.g. "SN"
	From, To   time.Time // created_at spread evenly over [From, To)
	Sample     int       // how many (id, reference) pairs to return, chosen at random among the seeded
	// BaseURL is the App's, for the payment_url of the events' records
	// ("" leaves the URL relative).
	BaseURL string
	// Expiry is each payment's lifetime (expires_at - created_at); 0 is
	// the default configuration's 30 minutes.
	Expiry time.Duration
}

// SeededPayment names one seeded payment.
type SeededPayment struct{ ID, Reference string }

// BulkSeeder writes many successful payments at once, with everything a
// payment that succeeded through the API leaves behind, for benchmarks
// on a big database. Errors: those of the database.
type BulkSeeder interface {
	SeedPayments(ctx context.Context, s SeedSpec) ([]SeededPayment, error)
}

// SeedPayersEvery is how many consecutive seeded payments share a payer
// number; SeedPayers numbers are used in turn. A payer thus pays at most
// SeedPayersEvery payments a day, far below the BCEAO ceiling of a payer
// for the bench's amounts, and the payer counters stay few.
const (
	SeedPayersEvery = 200
	SeedPayers      = 5000
)

// SeedPayerPhone is the payer number of seeded payer k (0 <= k <
// SeedPayers): +22177 then 1000000 + k on seven digits. The stores
// compute the same in SQL.
func SeedPayerPhone(k int) string { return fmt.Sprintf("+22177%07d", 1000000+k) }

// SeedPosting is one posting of every seeded payment's entry.
type SeedPosting struct {
	Account     string
	Amount      int64
	NonNegative bool
}

// SeedPlan is what the stores write for a SeedSpec, computed once: the
// same for every payment but for the columns the stores compute per row
// (ids, reference, times, payer).
type SeedPlan struct {
	SeedSpec
	FromMS, SpanMS int64 // created_at of payment i: FromMS + i*SpanMS/N, in milliseconds
	ExpiryMS       int64
	LimitAmount    int64 // XOF minor units
	Postings       []SeedPosting
	// Scopes are the merchant's volume scopes; the payer's scope is
	// PayerScopePrefix + phone.
	Scopes           []string
	PayerScopePrefix string
	StatKey          string // the stat counter of a payment entering success
	ProviderRefPre   string // provider_ref is this and 24 random hex digits
	Route            string
	RouteReason      string
	// Event is the data of each payment's payment.success event, with
	// the placeholders SeedID, SeedRef, SeedPhone, SeedCustomer,
	// SeedCreated (created_at and updated_at) and SeedExpires.
	Event string
}

// Placeholders in SeedPlan.Event.
const (
	SeedID       = "@@ID@@"
	SeedRef      = "@@REF@@"
	SeedPhone    = "@@PHONE@@"
	SeedCustomer = "@@CUSTOMER@@"
	SeedCreated  = "@@CREATED@@"
	SeedExpires  = "@@EXPIRES@@"
)

// ReferenceAlphabet is the alphabet of the 16 characters after TXN- of a
// reference (NewReference).
const ReferenceAlphabet = referenceAlphabet

// Plan checks the spec and computes what every seeded payment writes.
func (s SeedSpec) Plan() (*SeedPlan, error) {
	switch {
	case s.N <= 0:
		return nil, errors.New("seed: N must be positive")
	case s.MerchantID == "":
		return nil, errors.New("seed: no merchant")
	case s.Mode != ModeTest:
		return nil, errors.New("seed: only test-mode payments can be seeded")
	case s.Amount.Currency != XOF || s.Fee.Currency != XOF:
		return nil, errors.New("seed: amount and fee must be in XOF")
	case s.Amount.Minor <= 0 || s.Fee.Minor < 0 || s.Fee.Minor > s.Amount.Minor:
		return nil, errors.New("seed: the amount must be positive and the fee between 0 and the amount")
	case s.Provider == "" || s.Country == "":
		return nil, errors.New("seed: provider and country are required")
	case !s.From.Before(s.To):
		return nil, errors.New("seed: From must be before To")
	case s.Sample < 0:
		return nil, errors.New("seed: Sample must be at least 0")
	}
	if s.Expiry <= 0 {
		s.Expiry = 30 * time.Minute
	}
	p := &SeedPlan{SeedSpec: s, FromMS: s.From.UnixMilli(), SpanMS: s.To.UnixMilli() - s.From.UnixMilli(),
		ExpiryMS: s.Expiry.Milliseconds(), LimitAmount: s.Amount.Minor, Route: "simulator", RouteReason: "test mode",
		ProviderRefPre: "sim_" + strings.TrimPrefix(s.Provider, "channel_") + "_"}
	if p.SpanMS <= 0 {
		return nil, errors.New("seed: From and To must be at least a millisecond apart")
	}
	mode := string(s.Mode)
	net := s.Amount.Minor - s.Fee.Minor
	p.Postings = []SeedPosting{{Account: ledger.Provider(mode, s.Provider, ledger.Clearing), Amount: -s.Amount.Minor}}
	if s.Fee.Minor > 0 {
		p.Postings = append(p.Postings, SeedPosting{Account: ledger.Fees(mode), Amount: s.Fee.Minor})
	}
	if net > 0 {
		p.Postings = append(p.Postings, SeedPosting{Account: account(s.Mode, s.MerchantID, ledger.Available), Amount: net})
	}
	for i := range p.Postings {
		p.Postings[i].NonNegative = ledger.NonNegative(p.Postings[i].Account)
	}
	t := &Transaction{MerchantID: s.MerchantID, Mode: s.Mode, Provider: s.Provider, PayerPhone: "+221770000001"}
	for _, sc := range VolumeScopes(t) {
		if strings.HasSuffix(sc, t.PayerPhone) && strings.HasPrefix(sc, "p:") {
			p.PayerScopePrefix = strings.TrimSuffix(sc, t.PayerPhone)
			continue
		}
		p.Scopes = append(p.Scopes, sc)
	}
	if p.PayerScopePrefix == "" {
		return nil, errors.New("seed: no payer volume scope")
	}
	p.StatKey = PaymentStatKey{Mode: s.Mode, Provider: s.Provider, Country: s.Country, Status: StatusSuccess}.String()

	// The event's record, as writeEvent marshals it, with placeholders.
	created := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	expires := created.Add(time.Hour)
	rec := &Transaction{ID: SeedID, MerchantID: s.MerchantID, Mode: s.Mode, Type: TypePayment, Reference: SeedRef,
		Status: StatusSuccess, Amount: s.Amount, Country: s.Country, Provider: s.Provider, Route: p.Route,
		RouteReason: p.RouteReason, PayerPhone: SeedPhone, CustomerID: SeedCustomer, LimitAmount: p.LimitAmount,
		Fee: s.Fee, ExpiresAt: expires, CreatedAt: created, UpdatedAt: created, KeyType: KeySecret,
		PaymentURL: strings.TrimRight(s.BaseURL, "/") + "/checkout/" + SeedID}
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	ev := strings.ReplaceAll(string(data), Timestamp(created), SeedCreated)
	p.Event = strings.ReplaceAll(ev, Timestamp(expires), SeedExpires)
	return p, nil
}

// EventParts splits Event at its placeholders: Event is parts[0] +
// holes[0] + parts[1] + ... + parts[len(holes)], holes being placeholders.
// A store can then build each event's data by concatenation.
func (p *SeedPlan) EventParts() (parts, holes []string) {
	rest := p.Event
	for {
		at, hole := -1, ""
		for _, h := range []string{SeedID, SeedRef, SeedPhone, SeedCustomer, SeedCreated, SeedExpires} {
			if i := strings.Index(rest, h); i >= 0 && (at < 0 || i < at) {
				at, hole = i, h
			}
		}
		if at < 0 {
			return append(parts, rest), holes
		}
		parts, holes = append(parts, rest[:at]), append(holes, hole)
		rest = rest[at+len(hole):]
	}
}

// CreatedMS is the created_at of seeded payment i, in milliseconds.
func (p *SeedPlan) CreatedMS(i int64) int64 { return p.FromMS + i*p.SpanMS/int64(p.N) }
