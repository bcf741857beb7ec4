#!/usr/bin/env bash
# Regenerates BENCHMARKS.md: on both backends (SQLite as the store runs
# it, the WAL fdatasynced before every answer; PostgreSQL with fsync on, in a
# fresh schema per run), first every scenario of `xaalis bench` with the
# physical floors (floor-fsync, floor-tx) and the others, then a 60 s
# create-payment run with a CPU profile (its first and last 10 s), and
# the same on a database holding 1,000,000 payments seeded in bulk
# (create-payment 60 s; status and list at saturation, then open loop at
# 0.7 × it); then create-payment and the big database again with the
# server in a process of its own (--server-process: xaalis serve, the
# generator beside it); then the micro-benchmarks. About 40 minutes on a
# 2-core machine; keep it otherwise idle while it runs.
#
#   bash scripts/bench.sh
#
# Environment:
#   XAALIS_BENCH_POSTGRES_URL  PostgreSQL to measure (default postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
#   BENCH_DURATION             each scenario of the first run (default 5s)
#   BENCH_STEADY               the create-payment runs and the big-database runs (default 60s)
#   BENCH_BIG                  payments seeded for the big-database runs (default 1000000; 0: none)
#   BENCH_DRAIN                webhook-drain's time of producing events (default 60s: its p99
#                              rests on the 1 % slowest events, 60 of 6,000 at 100 a second)
#   BENCH_WARMUP, BENCH_CONCURRENCY, BENCH_SEED, BENCH_DRAIN_RATE
#   BENCH_OUT                  file to write (default BENCHMARKS.md)
#
# The hand-written analysis between the "analysis" markers of the existing
# BENCHMARKS.md is kept; everything else is regenerated.
set -euo pipefail

cd "$(dirname "$0")/.."
PG_URL="${XAALIS_BENCH_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}"
DURATION="${BENCH_DURATION:-5s}"
STEADY="${BENCH_STEADY:-60s}"
BIG="${BENCH_BIG:-1000000}"
WARMUP="${BENCH_WARMUP:-1s}"
CONC="${BENCH_CONCURRENCY:-16}"
SEED="${BENCH_SEED:-500}"
DRAIN_RATE="${BENCH_DRAIN_RATE:-100}"
DRAIN="${BENCH_DRAIN:-60s}"
OUT="${BENCH_OUT:-BENCHMARKS.md}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
bin="$work/xaalis"
log() { printf 'bench.sh: %s\n' "$*" >&2; }

log "building"
go build -o "$bin" ./cmd/xaalis

# busy_cores SECONDS: the CPUs the machine kept busy over that time.
busy_cores() {
	local a b
	a="$(head -1 /proc/stat)"
	sleep "$1"
	b="$(head -1 /proc/stat)"
	awk -v a="$a" -v b="$b" -v s="$1" 'BEGIN {
		n = split(a, x, " "); split(b, y, " ")
		for (i = 2; i <= 9; i++) if (i != 5 && i != 6) busy += y[i] - x[i]
		printf "%.2f", busy / 100 / s }'
}
idle_before="$(busy_cores 3)"
if awk -v c="$idle_before" 'BEGIN { exit !(c > 0.3) }'; then
	log "warning: the machine kept $idle_before CPUs busy before the run: something else is running; figures will be low"
fi
load1="$idle_before CPUs busy over 3 s"

common=(--duration "$DURATION" --warmup "$WARMUP" --concurrency "$CONC")
start=$SECONDS

# run_backend NAME URL EXTRA...: the two runs of one backend.
run_backend() {
	local name="$1" url="$2"
	shift 2
	local db=()
	[ -n "$url" ] && db=(--database-url "$url")
	log "$name: every scenario"
	timeout 900 "$bin" bench --scenario all "${common[@]}" --seed "$SEED" --drain-rate "$DRAIN_RATE" \
		--drain-duration "$DRAIN" --drain-timeout 60s "${db[@]}" "$@" --markdown --out "$work/$name-all.md" 2> >(sed "s/^/  /" >&2)
	log "$name: create-payment $STEADY with a CPU profile, then $BIG payments seeded"
	timeout 1800 "$bin" bench --scenario create-payment --duration "$STEADY" --warmup "$WARMUP" --concurrency "$CONC" \
		--floors=false --big "$BIG" --big-duration "$STEADY" --cpuprofile "$work/$name-cpu.prof" \
		"${db[@]}" "$@" --markdown --out "$work/$name-steady.md" 2> >(sed "s/^/  /" >&2)
	log "$name: the server in a process of its own: create-payment, then $BIG payments seeded"
	timeout 1800 "$bin" bench --server-process --scenario create-payment "${common[@]}" \
		--big "$BIG" --big-duration "$STEADY" --cpuprofile "$work/$name-apart-cpu.prof" \
		"${db[@]}" "$@" --markdown --out "$work/$name-apart.md" 2> >(sed "s/^/  /" >&2)
}

# A fresh SQLite database in a temporary directory each run (the default).
run_backend sqlite ""
if command -v pg_isready >/dev/null && ! pg_isready -d "$PG_URL" -q; then
	log "PostgreSQL at $PG_URL does not answer"
	exit 1
fi
run_backend postgres "$PG_URL" --fresh-schema

# The pool's size: PostgreSQL's commands on one backend process one after
# another (as on a single batcher connection: 2, since one connection of
# the pool listens for wake-ups) or on several, PostgreSQL grouping their
# WAL flushes itself.
sep='?'
case "$PG_URL" in *\?*) sep='&' ;; esac
for n in 2 4 8 16; do
	log "postgres: create-payment with pool_max_conns=$n"
	timeout 300 "$bin" bench --scenario create-payment "${common[@]}" --floors=false --target-check=false \
		--database-url "$PG_URL${sep}pool_max_conns=$n" --fresh-schema --json --out "$work/pool-$n.json" 2> >(sed "s/^/  /" >&2)
done
pool_table() {
	echo '| pool_max_conns | create-payment ok/s | p50 ms | p99 ms |'
	echo '|---:|---:|---:|---:|'
	for n in 2 4 8 16; do
		python3 - "$work/pool-$n.json" "$n" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
for r in rep["results"]:
    if r["scenario"] == "create-payment":
        print(f"| {sys.argv[2]} | {r['throughput_ok_per_s']:.0f} | {r['latency']['p50_ms']:.2f} | {r['latency']['p99_ms']:.2f} |")
PY
	done
}

log "micro-benchmarks"
go test -run '^$' -bench . -benchtime 300ms -count 1 ./internal/webhook ./internal/xaalis ./internal/http \
	>"$work/micro.txt" 2>&1

# top_profile PROFILE: the flat top and the xaalis functions by
# cumulative time.
top_profile() {
	echo '```'
	go tool pprof -top -nodecount=25 "$bin" "$1" 2>/dev/null | sed -n '1,35p'
	echo '```'
	echo
	echo 'Cumulative, filtered to the server'"'"'s functions, SQLite'"'"'s statement preparation (the SQL parser), execution'
	echo 'and commit, the system calls, pgx'"'"'s round trips and the garbage collector (`-top -cum`):'
	echo
	echo '```'
	go tool pprof -top -cum -nodecount=400 "$bin" "$1" 2>/dev/null |
		grep -E 'cum%|xaalis/internal/(xaalis|sqlite|postgres|http\.\(\*Server\)\.(idempotent|handlePaymentCreate))|_sqlite3Prepare$|Xsqlite3_step$|_sqlite3PagerCommitPhaseOne$|Xfsync|Xpwrite|Xpread|linux\.Syscall6$|pgconn.*(ExecStatement|receiveMessage)$|gcBgMarkWorker$' |
		head -36
	echo '```'
}

# writer_share PROFILE: the SQLite writer goroutine's share of a server's
# profile (its goroutines carry the pprof label xaalis=sqlite-writer).
writer_share() {
	local line
	# With every node kept, the nodes shown account for all the samples
	# the label selects.
	line="$(go tool pprof -top -nodefraction=0 -tagfocus=xaalis=sqlite-writer "$bin" "$1" 2>/dev/null |
		sed -n 's/^Showing nodes accounting for \(.*\) total$/\1/p' | head -1)"
	echo "On SQLite the writer goroutine (\`-tagfocus=xaalis=sqlite-writer\`) holds ${line:-?} of the server's samples."
}

pg_version="$(psql "$PG_URL" -Atc 'SHOW server_version' 2>/dev/null || echo unknown)"
pg_fsync="$(psql "$PG_URL" -Atc 'SHOW fsync' 2>/dev/null || echo unknown)"
analysis="$(awk '/<!-- analysis:begin -->/{on=1} on{print} /<!-- analysis:end -->/{on=0}' "$OUT" 2>/dev/null || true)"
if [ -z "$analysis" ]; then
	analysis=$'<!-- analysis:begin -->\n(No analysis yet.)\n<!-- analysis:end -->'
fi

{
	cat <<EOF
# Benchmarks

Regenerated by \`bash scripts/bench.sh\` ($(date -u +%Y-%m-%d), $((SECONDS - start)) s). Every figure comes
from \`xaalis bench\` (\`cmd/xaalis/bench.go\`, \`internal/bench\`): in each backend's first two runs the
API server runs in the same process, built as \`xaalis serve\` builds it (in the third, \`xaalis serve\`
itself runs beside it), on 127.0.0.1, with its own merchant per scenario
(test keys, the in-process provider simulators), rate limits and the idempotency quota raised
out of reach, and the business limits raised out of reach but still checked on every payment.
Each scenario is compared with floors measured in the same run on the same machine:
**floor-fsync**, the \`fdatasync\` rate of 4 KiB appends, one at a time, to a file on the
database's own filesystem (beside the SQLite file; beside PostgreSQL's data directory),
**floor-fsync-busy**, the same while one goroutine a CPU spins (no ratio: the aim's line gives
it; on this virtual machine the host finishes the guest's I/O on the CPUs the guest keeps
busy, and a loaded server's fdatasyncs wait longer than floor-fsync's),
**floor-tx**, a bare one-row INSERT transaction
committed per fsync on the same database, one client (the rate one durable commit per request
could reach), **floor-http**, an \`http.Server\` on loopback reading the same request and
answering a fixed body at the same concurrency, and **floor-db**, the bare durable writes of a
payment through the \`Store\` at the same concurrency (our own write path, so not a physical
floor). ×fsync, ×tx, ×http and ×db divide a scenario's ok/s by those floors. floor-fsync and
floor-http are measured again at the end of the run ("again, at the end"): this machine's disk
and CPUs are shared, and their speed moves from hour to hour; the ratios stay to the first
measures, and the second says how far the machine moved while the scenarios ran. stmts/ok is the
SQL statements sent per successful request; cmds/commit the commands each database commit
carried (group commit); CPU proc/machine the cores this process and the whole machine kept
busy, and CPU µs/ok this process's CPU (server and generator) per successful request. Speed
is measured here, never in tests. Each run ends with the ledger
check and the aims of issue 11, each marked met or not.

## The machine

| | |
|---|---|
| CPUs (\`nproc\`) | $(nproc) ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo)) |
| Memory | $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo) |
| Go | $(go version | cut -d' ' -f3-) |
| SQLite | modernc.org/sqlite (no cgo), WAL, one writer connection (\`synchronous=NORMAL\`, the WAL fdatasynced by its syncer before every answer) |
| PostgreSQL | $pg_version, \`fsync=$pg_fsync\`, over TCP on 127.0.0.1 |
| CPU in use just before the run | $load1 |

The load generator, the server and the database share the same $(nproc) CPUs.

## The commands

\`\`\`sh
bash scripts/bench.sh      # all of this file, both backends (about 40 minutes)

xaalis bench --scenario all ${common[*]} --seed $SEED --drain-rate $DRAIN_RATE --drain-duration $DRAIN --drain-timeout 60s
xaalis bench --scenario create-payment --duration $STEADY --warmup $WARMUP --concurrency $CONC --floors=false \\
  --big $BIG --big-duration $STEADY --cpuprofile cpu.prof
xaalis bench --server-process --scenario create-payment ${common[*]} --big $BIG --big-duration $STEADY \
  --cpuprofile server-cpu.prof
# PostgreSQL: the same three, with --database-url "\$XAALIS_BENCH_POSTGRES_URL" --fresh-schema
go test -run '^\$' -bench . -benchtime 300ms ./internal/webhook ./internal/xaalis ./internal/http
\`\`\`

\`--rate N\` drives a scenario open loop (N requests a second, each measured from its intended send
time, so a slow server cannot hide its queue); without it, \`--concurrency\` requests are kept in
flight (closed loop). The generator runs in the server's process, on the same CPUs, with
twice the runtime's GOMAXPROCS (\`--gomaxprocs\`): one share for the server and one for the
generator, as two processes would have; with one, the generator's goroutines queue for the
server's (status open loop at 9,000 req/s: p99 12-14 ms, against 5-6 ms with the generator in its
own process and 6.4-6.7 ms with twice the Ps; create-payment's 60 s open loop, on the other hand,
had a longer tail with twice the Ps: see the analysis). An open loop's
notes tell how late it sent its requests itself (the share sent more than 1 ms after their time,
the send lag's p99) and the latency from the actual send; the aims are judged from the intended time. Each
scenario's notes also tell what the process's garbage collector did during it, which the
generator and the server share: its cycles, its share of the process's CPU, the heap
left live at the end, and the heap allocated a request (the collections' cause; unlike a
p99 it varies little from run to run, so two builds compare on it), then what its scheduler
did: the goroutines created a request (as steady as the heap) and how long runnable goroutines
waited for a CPU. On PostgreSQL they give the WAL written a successful request (the cluster's WAL
position, read before and after the measured phase): the rows, index entries and row locks a
request writes, counted rather than timed, so two builds compare on it at any hour. The third run of each backend (\`--server-process\`, "The server in a process of its
own") starts \`xaalis serve\` as a child process on the bench's database, with the same limits
raised, and drives it over loopback as any client would: the generator and the server still share
the CPUs, but not one Go runtime, its scheduler and its garbage collector, as a client and a
server beside each other on one machine would. Its stmts/ok and cmds/commit are the server's,
read off its \`/metrics\` (\`xaalis_store_statements_total\`, \`_commits_total\`,
\`_commands_total\`); CPU proc counts both processes, and the notes give the server's share.
\`xaalis bench -h\` lists every flag. Columns: ok/s counts successful
answers; p50…p99.9 are per request, in milliseconds.

## SQLite

$(cat "$work/sqlite-all.md")

### Steady state and a big database

$(cat "$work/sqlite-steady.md")

### The server in a process of its own

$(cat "$work/sqlite-apart.md")

## PostgreSQL

$(cat "$work/postgres-all.md")

### Steady state and a big database

$(cat "$work/postgres-steady.md")

### The server in a process of its own

$(cat "$work/postgres-apart.md")

### The pool's size

create-payment, closed loop $CONC, $DURATION, the pool's size set by \`pool_max_conns\` in the URL.
One connection of the pool listens for wake-ups (LISTEN), so 2 runs the commands one after
another on one backend process, as a single batcher connection would (which would also share
one COMMIT among a batch's commands). The default is 16.

$(pool_table)

## Profile of create-payment at saturation

CPU profile of the measured phase of the steady \`xaalis bench --scenario create-payment\` run
(closed loop, $CONC concurrent, $STEADY, empty database), server and load generator in one process.

### SQLite

$(top_profile "$work/sqlite-cpu.prof")

### PostgreSQL

$(top_profile "$work/postgres-cpu.prof")

### The server in a process of its own

The server's own CPU profile (\`xaalis serve --pprof\`, fetched by \`xaalis bench --server-process
--cpuprofile\`) of create-payment's measured phase in the third run of each backend (closed loop,
$CONC concurrent, $DURATION, empty database): the server as deployed, without the generator's
share of the process. $(writer_share "$work/sqlite-apart-cpu.prof")

SQLite:

$(top_profile "$work/sqlite-apart-cpu.prof")

PostgreSQL:

$(top_profile "$work/postgres-apart-cpu.prof")

## What dominates, and what to change

$analysis

## Micro-benchmarks

\`go test -run '^\$' -bench . -benchtime 300ms\` of the hot functions: signing
(\`pkg/webhook.Sign\`, and \`Verify\`), the webhook payloads, the idempotency fingerprint
(\`xaalis.Fingerprint\`), the JSON of the transaction record (\`json.Marshal\` of a
\`*xaalis.Transaction\`), phone parsing (\`xaalis.ParsePhone\`), the TXN- reference, and the
request decoding and record envelope of \`internal/http\`.

\`\`\`
$(grep -E '^(Benchmark|pkg:|cpu:)' "$work/micro.txt")
\`\`\`
EOF
} >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
log "wrote $OUT in $((SECONDS - start)) s"
