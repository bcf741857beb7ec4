// Package chaos holds the chaos suite: the real `xaalis` binary, built by
// the tests and run as a subprocess, killed with SIGKILL under mixed load,
// with its PostgreSQL database stopped and started, its SQLite disk
// filled, its providers (the emulator) failing, and a webhook receiver that
// fails one attempt in five. After each, the suite checks what a merchant
// relies on: the ledger is clean, every answered write is there with its
// event, every unanswered request retried has exactly one outcome, nothing
// is created or paid out twice, and available goes below zero only through
// refunds and disputes.
//
// The tests run only with XAALIS_CHAOS=1 (a separate step of .ci/run, after
// the parallel suites, since one of them restarts PostgreSQL), so that
// `go test ./...` stays quick. XAALIS_CHAOS_PG_RESTART=1 makes the
// PostgreSQL test restart the cluster itself (pg_ctlcluster); without it
// the test takes its own database away (no connections allowed, its
// backends terminated), which disturbs no one else sharing the cluster.
// docs/reliability.md gives the figures of a run.
package chaos
