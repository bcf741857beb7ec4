// Command xaalis is the Xaalis server and its operator tools.
//
//	xaalis serve      run the API (and the admin listener)
//	xaalis migrate    apply database migrations and exit
//	xaalis merchant   create and update merchants
//	xaalis key        issue and revoke API keys
//	xaalis provider-emulator  emulate the providers' HTTP APIs
//	xaalis listen     forward the account's events to a local URL
//	xaalis trigger    make a test event happen through the API
//
// The commands that open the database take --database-url
// (XAALIS_DATABASE_URL) and read the key file of the secrets at rest from
// XAALIS_SECRET_KEY_FILE; listen and trigger take --api-key and --api-base.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	osuser "os/user"
	"runtime/debug"
	"syscall"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// gcPercent is the garbage collector's target unless GOGC says otherwise.
// The server's live heap is small (about 20 MB under load), so Go's
// default of 100 collected about ten times a second at full load, on the
// CPUs that serve; at 400 (a heap of about 100 MB) status served 15-20 %
// and a list page 25-35 % more a second, on this project's 2-CPU bench
// machine (BENCHMARKS.md).
const gcPercent = 400

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		// -h or --help after a command: its flags were printed; asked
		// for, so not a failure (as xaalis -h).
		os.Exit(0)
	}
	if err != nil {
		var u usageError
		if errors.As(err, &u) {
			fmt.Fprintln(os.Stderr, "xaalis:", err)
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "xaalis:", err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// parseError is a command's flag-parsing error: flag.ErrHelp itself for
// -h or --help (exit status 0), else a usageError.
func parseError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return flag.ErrHelp
	}
	return usageError{err.Error()}
}

const usage = `Usage: xaalis <command> [flags]

Commands:
  serve                  run the API server
  migrate                apply database migrations and exit
  merchant create        create a merchant and its four keys
  merchant update ID     change a merchant's status, KYC, providers, IP allowlist or return hosts
  key create             issue an API key
  key revoke KEY_ID      revoke an API key
  provider-emulator      run the emulator of the providers' HTTP APIs (live mode in development)
  operator token create  make a token for the operator API on the admin listener (--expires-in, --expires-at)
  operator token list    list operator tokens
  operator token revoke ID   end an operator token at once
  audit list             the audit log of operator actions, newest first
  payout-request approve|reject|complete|fail ID   move a payout request (operator)
  payment mark-refunded ID   mark a payment refunded by hand (providers without refunds)
  payout settle ID --outcome success|failed --note TEXT   record a payout's outcome its provider gave by hand
  refund settle ID --outcome success|failed --note TEXT   the same for a refund
  ledger check           compare every balance with its postings (exit 1 on a difference)
  bench                  load-test the API on loopback against the machine's floor (BENCHMARKS.md)
  dispute open --transaction ID [--amount N] [--reason TEXT]   open a dispute (operator)
  dispute decide ID --outcome won|lost                          close a dispute (operator)
  listen --forward-to URL [--events LIST] [--live]   forward the account's events, signed, to a local URL
  trigger EVENT          make a test event happen (payment.success, payout.failed, ...) through the API
  secrets rotate         encrypt the database's secrets under a new key, while servers run
  secrets add-key        add a key to the key file (several servers: before rotate --no-new-key)
  secrets status         the key file's keys and the secrets under each
  backup --output FILE   an online copy of the SQLite database (VACUUM INTO)

listen and trigger talk to a running server's API: --api-key (XAALIS_API_KEY) and
--api-base (XAALIS_API_BASE, default http://localhost:8080).

Run 'xaalis <command> -h' for the flags of a command.
`

// groups are the words that only begin a command (merchant create, ...).
var groups = map[string]bool{"merchant": true, "key": true, "operator": true, "audit": true, "payout-request": true,
	"ledger": true, "dispute": true, "secrets": true, "payment": true, "payout": true, "refund": true}

// groupHelp reports whether args ask for help after a group's word
// (operator token -h included).
func groupHelp(args []string) bool {
	if len(args) < 2 || !groups[args[0]] {
		return false
	}
	switch args[len(args)-1] {
	case "-h", "-help", "--help", "help":
	default:
		return false
	}
	return len(args) == 2 || len(args) == 3 && args[0] == "operator" && args[1] == "token"
}

// run is the whole program: tests call it with their own arguments,
// environment and output.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return usagef("no command given")
	}
	// Operator actions from the command line are audited under the
	// account that ran them; the admin listener names its token instead.
	user := getenv("USER")
	if user == "" {
		// Not set under cron, systemd or a bare container: the process's
		// own account, as id -un names it.
		if u, err := osuser.Current(); err == nil && u.Username != "" {
			user = u.Username
		} else {
			user = "unknown"
		}
	}
	ctx = xaalis.WithActor(ctx, xaalis.Actor{Name: "cli:" + user})
	if groupHelp(args) {
		// `xaalis merchant -h`: a group's word, then help, lists the
		// commands (exit 0, as -h after a command).
		fmt.Fprint(stdout, usage)
		return nil
	}
	ctx = withKeySetup(ctx, keySetup{file: getenv("XAALIS_SECRET_KEY_FILE"), stderr: stderr})
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		return cmdMigrate(ctx, args[1:], getenv, stdout, stderr)
	case "provider-emulator":
		return cmdProviderEmulator(ctx, args[1:], getenv, stdout, stderr)
	case "bench":
		return cmdBench(ctx, args[1:], getenv, stdout, stderr)
	case "listen":
		return cmdListen(ctx, args[1:], getenv, stdout, stderr)
	case "trigger":
		return cmdTrigger(ctx, args[1:], getenv, stdout, stderr)
	case "merchant":
		if len(args) < 2 {
			return usagef("merchant: expected create or update")
		}
		switch args[1] {
		case "create":
			return cmdMerchantCreate(ctx, args[2:], getenv, stdout, stderr)
		case "update":
			return cmdMerchantUpdate(ctx, args[2:], getenv, stdout, stderr)
		}
		return usagef("merchant: unknown subcommand %q (expected create or update)", args[1])
	case "key":
		if len(args) < 2 {
			return usagef("key: expected create or revoke")
		}
		switch args[1] {
		case "create":
			return cmdKeyCreate(ctx, args[2:], getenv, stdout, stderr)
		case "revoke":
			return cmdKeyRevoke(ctx, args[2:], getenv, stdout, stderr)
		}
		return usagef("key: unknown subcommand %q (expected create or revoke)", args[1])
	case "operator":
		if len(args) < 3 || args[1] != "token" {
			return usagef("operator: expected token create, token list or token revoke")
		}
		switch args[2] {
		case "create":
			return cmdOperatorTokenCreate(ctx, args[3:], getenv, stdout, stderr)
		case "list":
			return cmdOperatorTokenList(ctx, args[3:], getenv, stdout, stderr)
		case "revoke":
			return cmdOperatorTokenRevoke(ctx, args[3:], getenv, stdout, stderr)
		}
		return usagef("operator token: unknown subcommand %q (expected create, list or revoke)", args[2])
	case "audit":
		if len(args) < 2 || args[1] != "list" {
			return usagef("audit: expected list")
		}
		return cmdAuditList(ctx, args[2:], getenv, stdout, stderr)
	case "payout-request":
		if len(args) < 2 {
			return usagef("payout-request: expected approve, reject, complete or fail")
		}
		switch args[1] {
		case "approve", "reject", "complete", "fail":
			return cmdPayoutRequest(ctx, args[1], args[2:], getenv, stdout, stderr)
		}
		return usagef("payout-request: unknown action %q (expected approve, reject, complete or fail)", args[1])
	case "ledger":
		if len(args) < 2 || args[1] != "check" {
			return usagef("ledger: expected check")
		}
		return cmdLedgerCheck(ctx, args[2:], getenv, stdout, stderr)
	case "dispute":
		if len(args) < 2 {
			return usagef("dispute: expected open or decide")
		}
		switch args[1] {
		case "open":
			return cmdDisputeOpen(ctx, args[2:], getenv, stdout, stderr)
		case "decide":
			return cmdDisputeDecide(ctx, args[2:], getenv, stdout, stderr)
		}
		return usagef("dispute: unknown subcommand %q (expected open or decide)", args[1])
	case "secrets":
		return cmdSecrets(ctx, args[1:], getenv, stdout, stderr)
	case "backup":
		return cmdBackup(ctx, args[1:], getenv, stdout, stderr)
	case "payout", "refund":
		if len(args) < 2 || args[1] != "settle" {
			return usagef("%s: expected settle", args[0])
		}
		return cmdSettle(ctx, xaalis.TxType(args[0]), args[2:], getenv, stdout, stderr)
	case "payment":
		if len(args) < 2 || args[1] != "mark-refunded" {
			return usagef("payment: expected mark-refunded")
		}
		return cmdPaymentMarkRefunded(ctx, args[2:], getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return usagef("unknown command %q", args[0])
}
