package xaalis

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"
	"unicode/utf8"
)

// Interval is the billing period unit of a plan.
type Interval string

// Intervals.
const (
	IntervalDay   Interval = "day"
	IntervalWeek  Interval = "week"
	IntervalMonth Interval = "month"
	IntervalYear  Interval = "year"
)

// Valid reports whether i is a known interval.
func (i Interval) Valid() bool {
	switch i {
	case IntervalDay, IntervalWeek, IntervalMonth, IntervalYear:
		return true
	}
	return false
}

// Plan is a recurring price a subscription follows.
type Plan struct {
	ID            string
	MerchantID    string
	Mode          Mode
	Name          string
	Amount        Amount
	Interval      Interval
	IntervalCount int
	// TermCount is the plan's term: the billing periods a subscription
	// to it runs before it ends as expired; 0 is no term (billed until
	// cancelled).
	TermCount int
	Active    bool
	Metadata  map[string]string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MarshalJSON renders the public record.
func (p *Plan) MarshalJSON() ([]byte, error) {
	md := p.Metadata
	if md == nil {
		md = map[string]string{}
	}
	var term *int
	if p.TermCount > 0 {
		term = &p.TermCount
	}
	return json.Marshal(struct {
		ID            string            `json:"id"`
		Object        string            `json:"object"`
		Name          string            `json:"name"`
		Amount        string            `json:"amount"`
		Currency      Currency          `json:"currency"`
		Interval      Interval          `json:"interval"`
		IntervalCount int               `json:"interval_count"`
		TermCount     *int              `json:"term_count"`
		Active        bool              `json:"active"`
		Metadata      map[string]string `json:"metadata"`
		Livemode      bool              `json:"livemode"`
		CreatedAt     string            `json:"created_at"`
		UpdatedAt     string            `json:"updated_at"`
	}{p.ID, "plan", p.Name, p.Amount.Decimal(), p.Amount.Currency, p.Interval, p.IntervalCount, term,
		p.Active, md, p.Mode.Live(), Timestamp(p.CreatedAt), Timestamp(p.UpdatedAt)})
}

// PlanFilter selects a merchant's plans of one mode; Active, when set,
// keeps only active (true) or inactive (false) plans.
type PlanFilter struct {
	MerchantID string
	Mode       Mode
	Active     *bool
}

// PlanInput is the body of POST /v1/plans.
type PlanInput struct {
	Name          *string           `json:"name"`
	Amount        *Number           `json:"amount"`
	Currency      *string           `json:"currency"`
	Interval      *string           `json:"interval"`
	IntervalCount *int              `json:"interval_count"`
	TermCount     *int              `json:"term_count"`
	Metadata      map[string]string `json:"metadata"`
}

// Metadata limits.
const (
	MetadataMaxKeys     = 20
	MetadataMaxKeyLen   = 40
	MetadataMaxValueLen = 500
)

// ValidateMetadata adds a message per broken rule.
func ValidateMetadata(v ValidationErrors, md map[string]string) {
	if len(md) > MetadataMaxKeys {
		v.Add("metadata", "at most 20 keys are allowed")
	}
	for k, val := range md {
		if k == "" || utf8.RuneCountInString(k) > MetadataMaxKeyLen {
			v.Add("metadata", "keys must be 1 to 40 characters")
			break
		}
		if utf8.RuneCountInString(val) > MetadataMaxValueLen {
			v.Add("metadata."+k, "values must be at most 500 characters")
		}
	}
}

// Number is a JSON number from a request, kept as its literal so that
// integer checks are exact and a quoted number is told apart.
type Number struct{ lit string }

// UnmarshalJSON keeps the literal.
func (n *Number) UnmarshalJSON(b []byte) error { n.lit = string(b); return nil }

// MaxWholeUnits is the largest amount a request may name, in whole units:
// far above any ceiling, far below an overflow of its minor units.
const MaxWholeUnits = 1_000_000_000_000

// WholeUnits parses a request amount: a JSON integer count of whole units.
// It returns amount_must_be_positive for zero or less and adds a
// validation message for anything that is not an integer.
func WholeUnits(v ValidationErrors, field string, n *Number, c Currency) (Amount, error) {
	if n == nil || n.lit == "null" {
		v.Add(field, "is required")
		return Amount{}, nil
	}
	if len(n.lit) == 0 || (n.lit[0] != '-' && (n.lit[0] < '0' || n.lit[0] > '9')) {
		v.Add(field, "must be a number")
		return Amount{}, nil
	}
	i, err := strconv.ParseInt(n.lit, 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			if n.lit[0] == '-' {
				return Amount{}, E(EAmountMustBePositive)
			}
			v.Add(field, "is too large")
			return Amount{}, nil
		}
		v.Add(field, "must be an integer count of whole units")
		return Amount{}, nil
	}
	if i <= 0 {
		return Amount{}, E(EAmountMustBePositive)
	}
	if i > MaxWholeUnits {
		v.Add(field, "is too large")
		return Amount{}, nil
	}
	return Units(i, c), nil
}

// Timestamp renders t as ISO 8601 UTC with millisecond precision.
func Timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
