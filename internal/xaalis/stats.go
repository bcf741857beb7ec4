package xaalis

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// Stat counters are the business counts the metrics and the console read:
// rows of (day, metric, key, shard) holding a count and an amount, added
// to in the transaction of the command that caused them, so that every
// server process reads the same committed totals. They count events (a
// payment entering a status, a delivery attempt), so they only grow.
//
// Why rows kept by the command rather than a count at scrape time:
// counting every payment ever made grows without bound; the counters cost
// one upsert per event and a scrape reads a few hundred rows. Why a day
// and a shard: the console shows today's counts, and concurrent commands
// in several processes spread over StatShards rows instead of queueing on
// one. The days before yesterday are folded into StatDayFolded
// (App.CompactStats), so the table stays small.
type StatDelta struct {
	Metric string
	Key    string
	Count  int64
	// Amount is in minor units of XOF (payments: the amount's worth).
	Amount int64
}

// StatTotal is a counter summed over days and shards.
type StatTotal struct {
	Metric string
	Key    string
	Count  int64
	Amount int64
}

// Stat metrics.
const (
	// StatPayments counts payments entering a status; key PaymentStatKey.
	StatPayments = "payments"
	// StatDeliveries counts webhook delivery attempts by result
	// (DeliveryResult).
	StatDeliveries = "webhook_deliveries"
	// StatReplays counts requests answered from an Idempotency-Key's
	// stored response; key "".
	StatReplays = "idempotency_replays"
)

// StatShards is how many rows one counter spreads over.
const StatShards = 8

// StatDayFolded is the day that holds the folded totals of older days.
const StatDayFolded = 0

// statShard picks the shard of an event from its object's id.
func statShard(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % StatShards)
}

// PaymentStatKey names a payment counter: mode, provider ("" before one
// is chosen), country and status.
type PaymentStatKey struct {
	Mode     Mode
	Provider string
	Country  Country
	Status   Status
}

// String encodes the key as the counters store it.
func (k PaymentStatKey) String() string {
	return strings.Join([]string{string(k.Mode), k.Provider, string(k.Country), string(k.Status)}, "|")
}

// ParsePaymentStatKey decodes a stored key.
func ParsePaymentStatKey(s string) (PaymentStatKey, bool) {
	f := strings.Split(s, "|")
	if len(f) != 4 {
		return PaymentStatKey{}, false
	}
	return PaymentStatKey{Mode: Mode(f[0]), Provider: f[1], Country: Country(f[2]), Status: Status(f[3])}, true
}

// Delivery results, as StatDeliveries counts attempts.
const (
	DeliveryResultSucceeded = "succeeded"
	// DeliveryResultRetrying: the attempt failed and another is scheduled.
	DeliveryResultRetrying = "retrying"
	// DeliveryResultFailed: the attempt failed and it was the last.
	DeliveryResultFailed = "failed"
)

// DeliveryResults lists the results in a stable order.
var DeliveryResults = []string{DeliveryResultSucceeded, DeliveryResultRetrying, DeliveryResultFailed}

// DeliveryResult is the result of the attempt that left d in its status.
func DeliveryResult(d *Delivery) string {
	switch d.Status {
	case DeliverySucceeded:
		return DeliveryResultSucceeded
	case DeliveryFailed:
		return DeliveryResultFailed
	}
	return DeliveryResultRetrying
}

// AttemptStat is what RecordAttempt adds to the counters, in its own
// transaction: one attempt of d at its result, on the attempt's day.
func AttemptStat(d *Delivery, a *Attempt) (day int64, shard int, delta StatDelta) {
	return VolumeDay(a.AttemptedAt), statShard(d.ID), StatDelta{Metric: StatDeliveries, Key: DeliveryResult(d), Count: 1}
}

// countPayment counts a payment entering a status, in the transaction of
// the change.
func (a *App) countPayment(ctx context.Context, tx Tx, t *Transaction, to Status) error {
	if t.Type != TypePayment {
		return nil
	}
	k := PaymentStatKey{Mode: t.Mode, Provider: t.Provider, Country: t.Country, Status: to}
	if err := tx.AddStats(ctx, VolumeDay(a.now()), statShard(t.ID),
		StatDelta{Metric: StatPayments, Key: k.String(), Count: 1, Amount: t.LimitAmount}); err != nil {
		return fmt.Errorf("payment counters: %w", err)
	}
	return nil
}

// CountReplay counts a request answered from its Idempotency-Key's stored
// response. A replay writes nothing, and must stay one read: the count
// is kept in memory and added to the database's counters by FlushReplays,
// which the server calls every second, before every scrape and at
// shutdown (a crash loses at most the last second's count).
func (a *App) CountReplay() { a.replays.Add(1) }

// FlushReplays adds the replays counted since the last flush to the
// database's counters, in one transaction.
func (a *App) FlushReplays(ctx context.Context) error {
	n := a.replays.Swap(0)
	if n == 0 {
		return nil
	}
	err := a.Store.Update(ctx, func(tx Tx) error {
		return tx.AddStats(ctx, VolumeDay(a.now()), statShard(a.NewID()), StatDelta{Metric: StatReplays, Count: n})
	})
	if err != nil {
		a.replays.Add(n)
		return fmt.Errorf("flush replay counter: %w", err)
	}
	return nil
}

// CompactStats folds the stat counters of the days before yesterday into
// the folded day: totals are unchanged, and the table keeps about two
// days of rows. Any process may run it at any time.
func (a *App) CompactStats(ctx context.Context) (int64, error) {
	n, err := a.Store.CompactStats(ctx, VolumeDay(a.now())-1)
	if err != nil {
		return 0, fmt.Errorf("compact stat counters: %w", err)
	}
	return n, nil
}

// Day returns the start of t's UTC day.
func Day(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }
