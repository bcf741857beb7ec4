// Package metrics exposes Xaalis's business metrics to Prometheus.
//
// Two kinds of series, and how to aggregate them across server processes
// (docs/operations.md):
//
//   - Read from the database at scrape time (Collector): payments,
//     amounts, webhook deliveries, the webhook backlog, the jobs' lag,
//     Idempotency-Key replays and the last ledger check. Every process
//     reports the same values, since they come from committed rows; the
//     counters among them are kept by the commands themselves, in their own
//     transactions (xaalis.StatDelta). Aggregate them with max, never sum.
//   - Kept by the process (Provider, and the breakers in Collector):
//     provider requests, their durations, and each route's breaker. Each
//     process reports its own; sum the counters, and take min of
//     xaalis_provider_route_up.
package metrics

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Provider counts provider requests and times them: a provider.Observer.
type Provider struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewProvider registers the provider request series on reg.
func NewProvider(reg prometheus.Registerer) *Provider {
	p := &Provider{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "xaalis_provider_requests_total",
			Help: "Requests to providers by provider, route, operation and outcome (ok, refused, not_found, failure, cancelled, circuit_open); this process's.",
		}, []string{"provider", "route", "operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "xaalis_provider_request_duration_seconds",
			Help:    "Duration of the requests sent to providers, by provider, route and operation; this process's.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"provider", "route", "operation"}),
	}
	reg.MustRegister(p.requests, p.duration)
	return p
}

// ProviderRequest records one request; one the breaker refused is
// counted but not timed (nothing was sent).
func (p *Provider) ProviderRequest(provider, route, operation, outcome string, d time.Duration) {
	p.requests.WithLabelValues(provider, route, operation, outcome).Inc()
	if outcome != "circuit_open" {
		p.duration.WithLabelValues(provider, route, operation).Observe(d.Seconds())
	}
}

// Collector reads the business series at scrape time: from the database
// (xaalis.App.MetricsSnapshot, the same in every process) and from this
// process's provider breakers.
type Collector struct {
	App *xaalis.App
	// Timeout bounds the database reads of one scrape (default 10 s).
	Timeout time.Duration
	Logger  *slog.Logger
}

var (
	descPayments = prometheus.NewDesc("xaalis_payments_total",
		"Payments that entered a status, by mode, provider (none before the payer chose one), country and status; counted in the command's transaction, the same in every process.",
		[]string{"mode", "provider", "country", "status"}, nil)
	descAmount = prometheus.NewDesc("xaalis_payment_amount_xof_total",
		"Worth in XOF (whole units) of the payments that entered a status, by mode, provider and status; the same in every process.",
		[]string{"mode", "provider", "status"}, nil)
	descDeliveries = prometheus.NewDesc("xaalis_webhook_deliveries_total",
		"Webhook delivery attempts by result: succeeded, retrying (failed, another attempt is scheduled) or failed (the last attempt failed); the same in every process.",
		[]string{"result"}, nil)
	descPending = prometheus.NewDesc("xaalis_webhook_pending_deliveries",
		"Webhook deliveries not yet succeeded or given up (counted up to 100000).", nil, nil)
	descOldest = prometheus.NewDesc("xaalis_webhook_oldest_pending_seconds",
		"Age of the oldest pending webhook delivery; 0 when none is pending.", nil, nil)
	descLag = prometheus.NewDesc("xaalis_jobs_lag_seconds",
		"How long the oldest item due for a background job has waited (expire, reconcile, disputes, subscriptions, dispatch, webhooks); 0 when nothing is due.",
		[]string{"job"}, nil)
	descReplays = prometheus.NewDesc("xaalis_idempotency_replays_total",
		"Requests answered from their Idempotency-Key's stored response; the same in every process.", nil, nil)
	descProblems = prometheus.NewDesc("xaalis_ledger_check_problems",
		"Differences the last ledger check found (unbalanced entries, balances unlike their postings); absent before the first check.", nil, nil)
	descCheckTime = prometheus.NewDesc("xaalis_ledger_check_timestamp_seconds",
		"When the last ledger check ran (Unix time).", nil, nil)
	descRouteUp = prometheus.NewDesc("xaalis_provider_route_up",
		"1 when a live provider route's circuit breaker is closed, 0 when it is open or half open (probing a route that failed); this process's breakers. Test mode's in-process simulators (route simulator) are always 1.",
		[]string{"provider", "route"}, nil)
)

// simulatorRoute is the route label of test mode's in-process simulators.
const simulatorRoute = "simulator"

// Describe sends the series' descriptions.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPayments, descAmount, descDeliveries, descPending, descOldest, descLag,
		descReplays, descProblems, descCheckTime, descRouteUp} {
		ch <- d
	}
}

// Collect reads the series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	if c.App.Gateway != nil {
		for _, r := range c.App.LiveRoutes() {
			// Up only when closed: a half-open breaker is probing a route
			// that failed, and counts as down until a trial succeeds, so that
			// a route that keeps failing stays 0 between its probes.
			up := 0.0
			if r.State == "closed" {
				up = 1
			}
			ch <- prometheus.MustNewConstMetric(descRouteUp, prometheus.GaugeValue, up, r.Provider, r.Route)
		}
		// Test mode reaches each enabled provider through its in-process
		// simulator (route "simulator" in xaalis_provider_requests_total),
		// which has no breaker and cannot be down.
		if !c.App.LiveOnly && c.App.Config != nil {
			for _, name := range slices.Sorted(maps.Keys(c.App.Config.Providers)) {
				if c.App.Config.Providers[name].Enabled {
					ch <- prometheus.MustNewConstMetric(descRouteUp, prometheus.GaugeValue, 1, name, simulatorRoute)
				}
			}
		}
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := c.App.MetricsSnapshot(ctx)
	if err != nil {
		if c.Logger != nil {
			c.Logger.Error("metrics: read the database", "error", err)
		}
		ch <- prometheus.NewInvalidMetric(descPayments, err)
		return
	}
	deliveries := map[string]float64{}
	for _, r := range xaalis.DeliveryResults {
		deliveries[r] = 0
	}
	type amountKey struct{ mode, provider, status string }
	amounts := map[amountKey]float64{}
	var replays float64
	for _, st := range s.Stats {
		switch st.Metric {
		case xaalis.StatPayments:
			k, ok := xaalis.ParsePaymentStatKey(st.Key)
			if !ok {
				continue
			}
			prov := k.Provider
			if prov == "" {
				prov = "none"
			}
			ch <- prometheus.MustNewConstMetric(descPayments, prometheus.CounterValue, float64(st.Count),
				string(k.Mode), prov, string(k.Country), string(k.Status))
			// XOF amounts are kept in hundredths; the series is in francs.
			amounts[amountKey{string(k.Mode), prov, string(k.Status)}] += float64(st.Amount) / 100
		case xaalis.StatDeliveries:
			deliveries[st.Key] += float64(st.Count)
		case xaalis.StatReplays:
			replays += float64(st.Count)
		}
	}
	for k, v := range amounts {
		ch <- prometheus.MustNewConstMetric(descAmount, prometheus.CounterValue, v, k.mode, k.provider, k.status)
	}
	for r, v := range deliveries {
		ch <- prometheus.MustNewConstMetric(descDeliveries, prometheus.CounterValue, v, r)
	}
	ch <- prometheus.MustNewConstMetric(descReplays, prometheus.CounterValue, replays)
	ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(s.Backlog.Pending))
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, s.OldestPendingAge.Seconds())
	for _, j := range xaalis.Jobs {
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, s.JobLags[j].Seconds(), j)
	}
	if s.LedgerCheck != nil {
		ch <- prometheus.MustNewConstMetric(descProblems, prometheus.GaugeValue, float64(s.LedgerCheck.Problems))
		ch <- prometheus.MustNewConstMetric(descCheckTime, prometheus.GaugeValue, float64(s.LedgerCheck.At.UnixNano())/1e9)
	}
}

// Store exposes a store's running counters (xaalis.StoreStats): the
// statements this process sent to the database, the write transactions
// it committed and the commands they carried. Commands over commits is
// what group commit shares one fsync among; statements over commands what
// a command costs the database. Each process reports its own: sum them.
type Store struct {
	Stats xaalis.StatsReporter
}

var (
	descStatements = prometheus.NewDesc("xaalis_store_statements_total",
		"SQL statements this process sent to the database (reads and writes).", nil, nil)
	descCommits = prometheus.NewDesc("xaalis_store_commits_total",
		"Write transactions this process committed: on SQLite a batch of commands sharing one commit and fsync, on PostgreSQL a batch of payment and payout creations sharing one transaction, or one other command.", nil, nil)
	descReruns = prometheus.NewDesc("xaalis_store_batch_reruns_total",
		"Commands that a batch which rolled back sent to run again alone (PostgreSQL's group commit; always 0 on SQLite): a command at fault, or every command of a batch the database refused.", nil, nil)
	descCommands = prometheus.NewDesc("xaalis_store_commands_total",
		"Commands (state changes) this process's committed write transactions held (on SQLite, a batch's commands, those that failed and rolled back alone included).", nil, nil)
)

// Describe sends the series' descriptions.
func (s *Store) Describe(ch chan<- *prometheus.Desc) {
	ch <- descStatements
	ch <- descCommits
	ch <- descCommands
	ch <- descReruns
}

// Collect reads the counters.
func (s *Store) Collect(ch chan<- prometheus.Metric) {
	st := s.Stats.Stats()
	ch <- prometheus.MustNewConstMetric(descStatements, prometheus.CounterValue, float64(st.Statements))
	ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(st.Transactions))
	ch <- prometheus.MustNewConstMetric(descCommands, prometheus.CounterValue, float64(st.Commands))
	ch <- prometheus.MustNewConstMetric(descReruns, prometheus.CounterValue, float64(st.Reruns))
}
