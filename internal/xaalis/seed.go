package xaalis

import (
	"context"
	"time"
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
}

// SeededPayment names one seeded payment.
type SeededPayment struct{ ID, Reference string }

// BulkSeeder writes many successful payments at once, with everything a
// payment that succeeded through the API leaves behind, for benchmarks
// on a big database. Errors: those of the database.
type BulkSeeder interface {
	SeedPayments(ctx context.Context, s SeedSpec) ([]SeededPayment, error)
}
