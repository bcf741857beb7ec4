package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Result is the measurement of one scenario.
type Result struct {
	Scenario string `json:"scenario"`
	Backend  string `json:"backend"`
	// Load says how it was driven ("open loop, 500 req/s").
	Load        string  `json:"load"`
	Rate        float64 `json:"rate,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	// Seconds is the measured phase, from its start to the last answer.
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	OK       int64   `json:"ok"`
	// Throughput is successful requests a second.
	Throughput float64 `json:"throughput_ok_per_s"`
	// Latency is per request (open loop: from the intended send time). For
	// webhook-drain it is the lag from the event's commit to the receiver's
	// acknowledgement.
	Latency Latency `json:"latency"`
	// LatencyOf says what Latency measures when it is not the request.
	LatencyOf string `json:"latency_of,omitempty"`
	// Errors counts unsuccessful requests by "status code".
	Errors map[string]int64 `json:"errors"`
	// Kinds splits a mixed run by kind of operation.
	Kinds map[string]*KindStats `json:"kinds,omitempty"`
	// RatioHTTP and RatioDB are Throughput over the floors' throughput,
	// measured in the same run at the same concurrency.
	RatioHTTP *float64 `json:"ratio_to_http_floor,omitempty"`
	RatioDB   *float64 `json:"ratio_to_db_floor,omitempty"`
	// CPUProcess and CPUMachine are the CPUs used during the measured
	// phase, in cores: by this process (load generator and in-process
	// server) and by the whole machine (the database server too).
	CPUProcess float64 `json:"cpu_process_cores,omitempty"`
	CPUMachine float64 `json:"cpu_machine_cores,omitempty"`
	// Timeline counts successes in each whole second of the measured phase.
	Timeline []int64 `json:"ok_per_second,omitempty"`
	// Extra holds scenario-specific figures (webhook lag, deliveries...).
	Extra map[string]any `json:"extra,omitempty"`
	Notes []string       `json:"notes,omitempty"`
}

// SetRatios fills the ratios to the floors (nil floors are skipped).
func (r *Result) SetRatios(httpFloor, dbFloor *Result) {
	if httpFloor != nil && httpFloor.Throughput > 0 {
		v := r.Throughput / httpFloor.Throughput
		r.RatioHTTP = &v
	}
	if dbFloor != nil && dbFloor.Throughput > 0 {
		v := r.Throughput / dbFloor.Throughput
		r.RatioDB = &v
	}
}

// Report is everything one `xaalis bench` run measured.
type Report struct {
	Machine Machine   `json:"machine"`
	Backend string    `json:"backend"`
	DB      DBInfo    `json:"database"`
	Command string    `json:"command"`
	Results []*Result `json:"results"`
	// Ledger is the ledger check at the end of the run.
	Ledger LedgerCheck `json:"ledger_check"`
	// Target is met or not: create-payment at ≥ 0.7 of the DB floor with
	// p99 < 25 ms (the aim), when create-payment ran.
	Target *TargetCheck `json:"target,omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	MemoryMiB  int64  `json:"memory_mib,omitempty"`
	GoVersion  string `json:"go_version"`
	OS         string `json:"os"`
	CPUModel   string `json:"cpu_model,omitempty"`
}

// DBInfo describes the database of the run.
type DBInfo struct {
	Kind     string            `json:"kind"` // sqlite or postgres
	Version  string            `json:"version,omitempty"`
	Settings map[string]string `json:"settings,omitempty"`
}

// LedgerCheck is the result of App.LedgerCheck after the run.
type LedgerCheck struct {
	Ran      bool     `json:"ran"`
	Problems int      `json:"problems"`
	Details  []string `json:"details,omitempty"`
	Skipped  string   `json:"skipped,omitempty"`
}

// TargetCheck compares create-payment with the aim.
type TargetCheck struct {
	Scenario    string  `json:"scenario"`
	RatioDB     float64 `json:"ratio_to_db_floor"`
	P99         float64 `json:"p99_ms"`
	WantRatio   float64 `json:"want_ratio"`
	WantP99     float64 `json:"want_p99_ms"`
	Met         bool    `json:"met"`
	Explanation string  `json:"explanation"`
}

// Find returns the result of a scenario, or nil.
func (rep *Report) Find(scenario string) *Result {
	for _, r := range rep.Results {
		if r.Scenario == scenario {
			return r
		}
	}
	return nil
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func ratio(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.2f", *p)
}

func errorsText(m map[string]int64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// WriteText writes the report for a terminal.
func (rep *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "xaalis bench on %s (%s): %d CPUs, GOMAXPROCS %d, %s\n", rep.Backend, rep.DB.Version,
		rep.Machine.CPUs, rep.Machine.GOMAXPROCS, rep.Machine.GoVersion)
	for _, r := range rep.Results {
		fmt.Fprintf(w, "\n%s (%s, %.1fs)\n", r.Scenario, r.Load, r.Seconds)
		fmt.Fprintf(w, "  requests %d, ok %d, throughput %.1f ok/s\n", r.Requests, r.OK, r.Throughput)
		what := "latency"
		if r.LatencyOf != "" {
			what = r.LatencyOf
		}
		l := r.Latency
		fmt.Fprintf(w, "  %s ms: p50 %.2f  p90 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n", what, l.P50, l.P90, l.P99, l.P999, l.Max)
		fmt.Fprintf(w, "  errors: %s\n", errorsText(r.Errors))
		if r.CPUMachine > 0 {
			fmt.Fprintf(w, "  CPU: this process %.2f cores, the machine %.2f cores\n", r.CPUProcess, r.CPUMachine)
		}
		if r.RatioHTTP != nil || r.RatioDB != nil {
			fmt.Fprintf(w, "  ratio to floor: http %s, db %s\n", ratio(r.RatioHTTP), ratio(r.RatioDB))
		}
		for _, k := range slices.Sorted(maps.Keys(r.Kinds)) {
			ks := r.Kinds[k]
			fmt.Fprintf(w, "  %s: %d ok of %d, %.1f ok/s, p50 %.2f p99 %.2f ms, errors: %s\n", k, ks.OK, ks.Requests,
				ks.Throughput, ks.Latency.P50, ks.Latency.P99, errorsText(ks.Errors))
		}
		for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
			fmt.Fprintf(w, "  %s: %v\n", k, r.Extra[k])
		}
		if len(r.Timeline) > 1 {
			fmt.Fprintf(w, "  ok per second: %v\n", r.Timeline)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  note: %s\n", n)
		}
	}
	if t := rep.Target; t != nil {
		fmt.Fprintf(w, "\ntarget (%s ≥ %.1f of the DB floor, p99 < %.0f ms): %s\n", t.Scenario, t.WantRatio, t.WantP99, t.Explanation)
	}
	fmt.Fprintln(w)
	switch {
	case !rep.Ledger.Ran:
		fmt.Fprintf(w, "ledger check: skipped (%s)\n", rep.Ledger.Skipped)
	case rep.Ledger.Problems == 0:
		fmt.Fprintln(w, "ledger check: 0 problems")
	default:
		fmt.Fprintf(w, "ledger check: %d problems\n", rep.Ledger.Problems)
		for _, d := range rep.Ledger.Details {
			fmt.Fprintf(w, "  %s\n", d)
		}
	}
}

// WriteMarkdown writes the report's table, for BENCHMARKS.md.
func (rep *Report) WriteMarkdown(w io.Writer) {
	var settings []string
	for _, k := range slices.Sorted(maps.Keys(rep.DB.Settings)) {
		settings = append(settings, k+"="+rep.DB.Settings[k])
	}
	fmt.Fprintf(w, "Database: %s (%s). Command: `%s`.\n\n", rep.DB.Version, strings.Join(settings, ", "), rep.Command)
	fmt.Fprintf(w, "| scenario | load | ok/s | p50 ms | p90 ms | p99 ms | p99.9 ms | ×http floor | ×db floor | CPU proc/machine | errors |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Results {
		name := r.Scenario
		if r.LatencyOf != "" {
			name += " †"
		}
		l := r.Latency
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %s | %.2f/%.2f | %s |\n", name, r.Load, r.Throughput,
			l.P50, l.P90, l.P99, l.P999, ratio(r.RatioHTTP), ratio(r.RatioDB), r.CPUProcess, r.CPUMachine, errorsText(r.Errors))
	}
	var notes []string
	for _, r := range rep.Results {
		for _, k := range slices.Sorted(maps.Keys(r.Kinds)) {
			ks := r.Kinds[k]
			notes = append(notes, fmt.Sprintf("%s, %s: %.0f ok/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms",
				r.Scenario, k, ks.Throughput, ks.Latency.P50, ks.Latency.P99, ks.Latency.P999))
		}
		if d := r.Decay(); d != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Scenario, d))
		}
		if r.LatencyOf != "" {
			notes = append(notes, fmt.Sprintf("† %s: the latency columns are the %s; ok/s is events produced", r.Scenario, r.LatencyOf))
		}
		if len(r.Extra) > 0 {
			var parts []string
			for _, k := range slices.Sorted(maps.Keys(r.Extra)) {
				parts = append(parts, fmt.Sprintf("%s %v", k, r.Extra[k]))
			}
			notes = append(notes, fmt.Sprintf("%s: %s", r.Scenario, strings.Join(parts, ", ")))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
	fmt.Fprintln(w)
	if t := rep.Target; t != nil {
		fmt.Fprintf(w, "Target (%s ≥ %.1f × db floor with p99 < %.0f ms): **%s**\n\n", t.Scenario, t.WantRatio, t.WantP99, t.Explanation)
	}
	switch {
	case !rep.Ledger.Ran:
		fmt.Fprintf(w, "Ledger check after the run: skipped (%s).\n", rep.Ledger.Skipped)
	default:
		fmt.Fprintf(w, "Ledger check after the run: **%d problems**.\n", rep.Ledger.Problems)
	}
}

// Decay describes a throughput that changed by 10 % or more from the
// first second of the measured phase to its last whole second, or "".
func (r *Result) Decay() string {
	n := len(r.Timeline)
	if n < 3 || r.Timeline[0] == 0 {
		return ""
	}
	first, last := r.Timeline[0], r.Timeline[n-1]
	change := float64(last-first) / float64(first)
	if change > -0.10 && change < 0.10 {
		return ""
	}
	return fmt.Sprintf("ok/s went from %d in the first second to %d in the last (%+.0f %%)", first, last, change*100)
}
