package bench

import (
	"fmt"
	"math"
)

// The aims of the write path (issue 11), judged on one run's figures.
const (
	// OpenFraction is the share of a scenario's saturation (closed loop)
	// offered open loop to judge its latency at a load it sustains.
	OpenFraction = 0.7
	// CreateP99 bounds create-payment's p99 open loop, on SQLite.
	CreateP99 = 25.0
	// ReadP99 bounds status's and list's p99 open loop, with the big
	// seed present.
	ReadP99 = 10.0
)

// OpenName is the name of scenario's open-loop run at OpenFraction of
// its saturation.
func OpenName(scenario string) string { return fmt.Sprintf("%s@%.1f×max", scenario, OpenFraction) }

// AgainName is the name of a floor's second measure, at the end of a run.
func AgainName(floor string) string { return floor + " (again, at the end)" }

// Drift says how far a floor's second measure (AgainName) moved from its
// first, in per cent of the first, or "" when either is missing.
func (rep *Report) Drift(floor string) string {
	first, again := rep.Find(floor), rep.Find(AgainName(floor))
	if first == nil || again == nil || first.Throughput <= 0 {
		return ""
	}
	return fmt.Sprintf("%+.0f %%", 100*(again.Throughput-first.Throughput)/first.Throughput)
}

// BigName is the name of scenario's run with n payments already present.
func BigName(scenario string, n int) string { return fmt.Sprintf("%s [%d payments]", scenario, n) }

// Aims judges the run against the aims its figures allow: those whose
// scenarios did not run are left out. big is the size of the big seed
// (0: none).
func Aims(rep *Report, big int) []Check {
	var out []Check
	add := func(aim string, met bool, format string, args ...any) {
		out = append(out, Check{Aim: aim, Met: met, Got: fmt.Sprintf(format, args...)})
	}
	cp := rep.Find(CreatePayment)
	fsync := rep.Find(FloorFsync)
	sqlite := rep.Backend == "sqlite"
	if cp != nil {
		wantFsync, wantOK := 0.7, 2500.0
		if sqlite {
			wantFsync, wantOK = 1.0, 3000
		}
		if fsync != nil && fsync.Throughput > 0 {
			r := cp.Throughput / fsync.Throughput
			got := fmt.Sprintf("%.0f ok/s = %.2f × floor-fsync (%.0f fdatasync/s)", cp.Throughput, r, fsync.Throughput)
			if again := rep.Find(AgainName(FloorFsync)); again != nil && again.Throughput > 0 {
				got += fmt.Sprintf("; the disk gave %.0f fdatasync/s at the end of the run (%s), %.2f × that",
					again.Throughput, rep.Drift(FloorFsync), cp.Throughput/again.Throughput)
			}
			if busy := rep.Find(FloorFsyncBusy); busy != nil && busy.Throughput > 0 {
				got += fmt.Sprintf("; with every CPU busy it gave %.0f fdatasync/s (floor-fsync-busy), %.2f × that",
					busy.Throughput, cp.Throughput/busy.Throughput)
			}
			add(fmt.Sprintf("create-payment ≥ %.1f × floor-fsync", wantFsync), r >= wantFsync, "%s", got)
		}
		add(fmt.Sprintf("create-payment ≥ %.0f ok/s", wantOK), cp.Throughput >= wantOK,
			"%.0f ok/s, closed loop %d", cp.Throughput, cp.Concurrency)
		if open := rep.Find(OpenName(CreatePayment)); open != nil && sqlite {
			add(fmt.Sprintf("create-payment p99 ≤ %.0f ms open loop at %.1f × its saturation", CreateP99, OpenFraction),
				keptUp(open) && open.Latency.P99 <= CreateP99, "%s", openGot(open))
		}
		if po := rep.Find(Payout); po != nil && cp.Throughput > 0 {
			r := po.Throughput / cp.Throughput
			add("payout ≥ 0.8 × create-payment", r >= 0.8, "%.0f ok/s = %.2f × create-payment", po.Throughput, r)
		}
	}
	if rp := rep.Find(Replay); rp != nil {
		add("replay ≥ 10,000 ok/s", rp.Throughput >= 10000, "%.0f ok/s", rp.Throughput)
	}
	if d := rep.Find(WebhookDrain); d != nil {
		add(fmt.Sprintf("webhook-drain p99 ≤ 1 s from commit to acknowledgement (%.0f %% of attempts failing)", DrainFailRate*100),
			d.Latency.P99 <= 1000 && d.Latency.P99 > 0, "p99 %.0f ms at %s", d.Latency.P99, d.Load)
	}
	if big > 0 {
		if bcp := rep.Find(BigName(CreatePayment, big)); bcp != nil && cp != nil && cp.Throughput > 0 {
			r := bcp.Throughput / cp.Throughput
			add(fmt.Sprintf("create-payment with %d payments present within 15 %% of the empty database", big),
				r >= 0.85, "%.0f ok/s against %.0f (%+.0f %%)", bcp.Throughput, cp.Throughput, (r-1)*100)
		}
		for _, s := range []string{Status, List} {
			if open := rep.Find(OpenName(BigName(s, big))); open != nil {
				add(fmt.Sprintf("%s p99 ≤ %.0f ms open loop at %.1f × its saturation, %d payments present", s, ReadP99, OpenFraction, big),
					keptUp(open) && open.Latency.P99 <= ReadP99, "%s", openGot(open))
			}
		}
		for _, r := range rep.Results {
			if r.FirstTen > 0 && r.Scenario == BigName(CreatePayment, big) {
				change := (r.LastTen - r.FirstTen) / r.FirstTen
				add(fmt.Sprintf("%s: the last 10 s within 10 %% of the first 10 s", r.Scenario), math.Abs(change) <= 0.10,
					"%.0f ok/s then %.0f ok/s (%+.0f %%)", r.FirstTen, r.LastTen, change*100)
			}
		}
	}
	if rep.Ledger.Ran {
		add("the ledger check finds 0 problems after the run", rep.Ledger.Problems == 0, "%d problems", rep.Ledger.Problems)
	}
	return out
}

// keptUp reports whether an open-loop run completed what it was offered.
func keptUp(r *Result) bool {
	return r.Requests > 0 && r.OK == r.Requests && r.Throughput >= 0.95*r.Rate
}

func openGot(r *Result) string {
	s := fmt.Sprintf("offered %.0f req/s, completed %.0f ok/s, p99 %.1f ms", r.Rate, r.Throughput, r.Latency.P99)
	if !keptUp(r) {
		s += " (it did not keep up)"
	}
	return s
}
