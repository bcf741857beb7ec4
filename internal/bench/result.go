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
	// SendLag (open loop) is how late the generator sent the requests:
	// from each one's intended send time to a worker sending it. The
	// generator shares the machine's CPUs and Go's scheduler with the
	// in-process server, so under load it sends late, and Latency, from
	// the intended time, counts that too. LateSends is the share of
	// requests sent more than 1 ms late; FromSend is the latency from the
	// actual send. The aims are judged on Latency.
	SendLag   *Latency `json:"send_lag,omitempty"`
	LateSends float64  `json:"late_send_share,omitempty"`
	FromSend  *Latency `json:"latency_from_send,omitempty"`
	// LatencyOf says what Latency measures when it is not the request.
	LatencyOf string `json:"latency_of,omitempty"`
	// Errors counts unsuccessful requests by "status code".
	Errors map[string]int64 `json:"errors"`
	// Kinds splits a mixed run by kind of operation.
	Kinds map[string]*KindStats `json:"kinds,omitempty"`
	// RatioHTTP and RatioDB are Throughput over the floors' throughput,
	// measured in the same run at the same concurrency; RatioFsync and
	// RatioTx over the physical floors' (one operation at a time).
	RatioHTTP  *float64 `json:"ratio_to_http_floor,omitempty"`
	RatioDB    *float64 `json:"ratio_to_db_floor,omitempty"`
	RatioFsync *float64 `json:"ratio_to_fsync_floor,omitempty"`
	RatioTx    *float64 `json:"ratio_to_tx_floor,omitempty"`
	// CPUProcess and CPUMachine are the CPUs used during the measured
	// phase, in cores: by this process (load generator and in-process
	// server; with the server in a process of its own, both processes)
	// and by the whole machine (the database server too).
	CPUProcess float64 `json:"cpu_process_cores,omitempty"`
	CPUMachine float64 `json:"cpu_machine_cores,omitempty"`
	// CPUServer is the share of CPUProcess of a server in a process of
	// its own (xaalis bench --server-process); 0 in process.
	CPUServer float64 `json:"cpu_server_cores,omitempty"`
	// CPUPerOK is this process's CPU time during the measured phase per
	// successful request, in µs (CPUProcess × Seconds / OK; both
	// processes' with the server apart): what a request cost, generator
	// included. Runs of one build on this shared
	// machine vary less in it than in their throughput, which also
	// follows how long requests waited, so it tells a slow run that did
	// more work from one that waited.
	CPUPerOK float64 `json:"cpu_process_us_per_ok,omitempty"`
	// GC is what this process's garbage collector did during the
	// measured phase.
	GC *GC `json:"gc,omitempty"`
	// Sched is what this process's scheduler did during the measured
	// phase.
	Sched *Sched `json:"sched,omitempty"`
	// Timeline counts successes in each whole second of the measured phase.
	Timeline []int64 `json:"ok_per_second,omitempty"`
	// FirstTen and LastTen are the ok/s of the first and the last 10 s of
	// a measured phase of 20 s or more: a steady state keeps them close.
	FirstTen float64 `json:"first_10s_ok_per_s,omitempty"`
	LastTen  float64 `json:"last_10s_ok_per_s,omitempty"`
	// StatementsPerOK is the SQL statements the store sent during the
	// measured phase per successful request (background work included);
	// CommandsPerCommit is the commands (Store.Update calls) a committed
	// write transaction held on average: above 1, group commit at work.
	StatementsPerOK   float64 `json:"statements_per_ok,omitempty"`
	CommandsPerCommit float64 `json:"commands_per_commit,omitempty"`
	// WALBytesPerOK is the WAL PostgreSQL wrote during the measured phase
	// per successful request (the whole cluster's: background work and
	// other databases included; 0 on SQLite): the rows, index entries and
	// locks a request writes, counted rather than timed, so two builds
	// compare on it whatever the machine's speed.
	WALBytesPerOK float64 `json:"wal_bytes_per_ok,omitempty"`
	// Extra holds scenario-specific figures (webhook lag, deliveries...).
	Extra map[string]any `json:"extra,omitempty"`
	Notes []string       `json:"notes,omitempty"`
}

// sendLagNote tells how late an open loop's generator sent, and the
// latency from the actual send ("" for a closed loop).
func (r *Result) sendLagNote() string {
	if r.SendLag == nil {
		return ""
	}
	n := fmt.Sprintf("the generator sent %.1f %% of requests more than %s late (send lag p99 %.2f ms, max %.2f ms)",
		100*r.LateSends, lateSend, r.SendLag.P99, r.SendLag.Max)
	if r.FromSend != nil {
		n += fmt.Sprintf("; from the actual send, p50 %.2f ms, p99 %.2f ms", r.FromSend.P50, r.FromSend.P99)
	}
	return n
}

// Floors are the floors measured in a run (nil: not measured).
type Floors struct {
	HTTP, DB, Fsync, Tx *Result
}

// SetRatios fills the ratios to the floors (nil floors are skipped).
func (r *Result) SetRatios(f Floors) {
	ratio := func(floor *Result) *float64 {
		if floor == nil || floor.Throughput <= 0 {
			return nil
		}
		v := r.Throughput / floor.Throughput
		return &v
	}
	r.RatioHTTP, r.RatioDB, r.RatioFsync, r.RatioTx = ratio(f.HTTP), ratio(f.DB), ratio(f.Fsync), ratio(f.Tx)
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
	// Checks are the aims the run could judge (see Check).
	Checks []Check `json:"checks,omitempty"`
}

// Check is one aim of the write path, judged on this run's figures.
type Check struct {
	// Aim says what is wanted ("create-payment ≥ 1.0 × floor-fsync").
	Aim string `json:"aim"`
	// Got says what the run measured.
	Got string `json:"got"`
	Met bool   `json:"met"`
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

func metMark(met bool) string {
	if met {
		return "yes"
	}
	return "**no**"
}

// figure is a per-request figure, or a dash when not measured.
func figure(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f", v)
}

// micros is a figure in whole µs, or "—" for none.
func micros(v float64) string {
	if v <= 0 {
		return "—"
	}
	return fmt.Sprintf("%.0f", v)
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
			if r.CPUServer > 0 {
				fmt.Fprintf(w, "  CPU: the server's process %.2f cores and the generator's %.2f, the machine %.2f cores",
					r.CPUServer, r.CPUProcess-r.CPUServer, r.CPUMachine)
			} else {
				fmt.Fprintf(w, "  CPU: this process %.2f cores, the machine %.2f cores", r.CPUProcess, r.CPUMachine)
			}
			switch {
			case r.CPUPerOK > 0 && r.CPUServer > 0:
				fmt.Fprintf(w, "; both processes %.0f µs a request", r.CPUPerOK)
			case r.CPUPerOK > 0:
				fmt.Fprintf(w, "; this process %.0f µs a request", r.CPUPerOK)
			}
			fmt.Fprintln(w)
		}
		if r.StatementsPerOK > 0 {
			fmt.Fprintf(w, "  SQL statements per ok request %.1f, commands per commit %.1f\n", r.StatementsPerOK, r.CommandsPerCommit)
		}
		if n := r.gcNote(); n != "" {
			fmt.Fprintf(w, "  %s\n", n)
		}
		if n := r.schedNote(); n != "" {
			fmt.Fprintf(w, "  %s\n", n)
		}
		if r.RatioHTTP != nil || r.RatioDB != nil || r.RatioFsync != nil || r.RatioTx != nil {
			fmt.Fprintf(w, "  ratio to floor: fsync %s, tx %s, http %s, db %s\n", ratio(r.RatioFsync), ratio(r.RatioTx),
				ratio(r.RatioHTTP), ratio(r.RatioDB))
		}
		if r.FirstTen > 0 {
			fmt.Fprintf(w, "  first 10 s %.0f ok/s, last 10 s %.0f ok/s\n", r.FirstTen, r.LastTen)
		}
		if n := r.sendLagNote(); n != "" {
			fmt.Fprintf(w, "  %s\n", n)
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
	if len(rep.Checks) > 0 {
		fmt.Fprintln(w, "\naims:")
		for _, c := range rep.Checks {
			mark := "no "
			if c.Met {
				mark = "yes"
			}
			fmt.Fprintf(w, "  %s  %s: %s\n", mark, c.Aim, c.Got)
		}
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
	fmt.Fprintf(w, "| scenario | load | ok/s | p50 ms | p90 ms | p99 ms | p99.9 ms | ×fsync | ×tx | ×http | ×db | stmts/ok | cmds/commit | CPU proc/machine | CPU µs/ok | errors |\n")
	fmt.Fprintf(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Results {
		name := r.Scenario
		if r.LatencyOf != "" {
			name += " †"
		}
		l := r.Latency
		fmt.Fprintf(w, "| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %.2f/%.2f | %s | %s |\n", name, r.Load, r.Throughput,
			l.P50, l.P90, l.P99, l.P999, ratio(r.RatioFsync), ratio(r.RatioTx), ratio(r.RatioHTTP), ratio(r.RatioDB),
			figure(r.StatementsPerOK), figure(r.CommandsPerCommit), r.CPUProcess, r.CPUMachine, micros(r.CPUPerOK), errorsText(r.Errors))
	}
	var notes []string
	for _, r := range rep.Results {
		for _, k := range slices.Sorted(maps.Keys(r.Kinds)) {
			ks := r.Kinds[k]
			notes = append(notes, fmt.Sprintf("%s, %s: %.0f ok/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms",
				r.Scenario, k, ks.Throughput, ks.Latency.P50, ks.Latency.P99, ks.Latency.P999))
		}
		if r.FirstTen > 0 {
			notes = append(notes, fmt.Sprintf("%s: first 10 s %.0f ok/s, last 10 s %.0f ok/s", r.Scenario, r.FirstTen, r.LastTen))
		}
		if d := r.Decay(); d != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Scenario, d))
		}
		if n := r.sendLagNote(); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Scenario, n))
		}
		if n := r.gcNote(); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Scenario, n))
		}
		if n := r.schedNote(); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", r.Scenario, n))
		}
		if r.WALBytesPerOK > 0 {
			prec := 0
			if r.WALBytesPerOK < 10 {
				prec = 1
			}
			notes = append(notes, fmt.Sprintf("%s: PostgreSQL wrote %.*f bytes of WAL a successful request", r.Scenario, prec, r.WALBytesPerOK))
		}
		if r.CPUServer > 0 {
			notes = append(notes, fmt.Sprintf("%s: two processes: the server's kept %.2f cores busy, the generator's %.2f",
				r.Scenario, r.CPUServer, r.CPUProcess-r.CPUServer))
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
	if len(rep.Checks) > 0 {
		fmt.Fprintln(w, "| aim | measured | met |")
		fmt.Fprintln(w, "|---|---|---|")
		for _, c := range rep.Checks {
			fmt.Fprintf(w, "| %s | %s | %s |\n", c.Aim, c.Got, metMark(c.Met))
		}
		fmt.Fprintln(w)
	}
	switch {
	case !rep.Ledger.Ran:
		fmt.Fprintf(w, "Ledger check after the run: skipped (%s).\n", rep.Ledger.Skipped)
	default:
		fmt.Fprintf(w, "Ledger check after the run: **%d problems**.\n", rep.Ledger.Problems)
	}
}

// Decay describes a throughput that changed by 10 % or more from the
// start of the measured phase to its end (the first and last 10 s of a
// run of 20 s or more, else the first and last whole seconds), or "".
func (r *Result) Decay() string {
	first, last, span := r.FirstTen, r.LastTen, "10 s"
	if first == 0 {
		n := len(r.Timeline)
		if n < 3 || r.Timeline[0] == 0 {
			return ""
		}
		first, last, span = float64(r.Timeline[0]), float64(r.Timeline[n-1]), "second"
	}
	if first == 0 {
		return ""
	}
	change := (last - first) / first
	if change > -0.10 && change < 0.10 {
		return ""
	}
	return fmt.Sprintf("ok/s went from %.0f in the first %s to %.0f in the last (%+.0f %%)", first, span, last, change*100)
}

// SetCPUPerOK sets CPUPerOK from CPUProcess, Seconds and OK (0 without a
// success or a measure).
func (r *Result) SetCPUPerOK() {
	r.CPUPerOK = 0
	if r.OK > 0 && r.CPUProcess > 0 && r.Seconds > 0 {
		r.CPUPerOK = r.CPUProcess * r.Seconds * 1e6 / float64(r.OK)
	}
}
