package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/xaalis/xaalis/internal/postgres"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

const defaultDatabaseURL = "sqlite://./xaalis-data/xaalis.db"

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("xaalis "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// envOr returns the environment variable, or def when it is unset.
func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// databaseFlag adds --database-url, defaulting to XAALIS_DATABASE_URL.
func databaseFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	v := fs.String("database-url", envOr(getenv, "XAALIS_DATABASE_URL", defaultDatabaseURL),
		"database URL: sqlite://PATH or postgres://... (env XAALIS_DATABASE_URL)")
	// -h shows the default without the password the environment's URL
	// may hold.
	fs.Lookup("database-url").DefValue = redactURL(*v)
	return v
}

// redactURL hides a database URL's passwords, in its user part or its
// query (postgres://u:pw@h/db, postgres://h/db?password=pw&sslpassword=pw),
// or in a libpq key/value string (host=h password=pw), for help texts and
// error messages.
func redactURL(s string) string {
	s = passwordValue.ReplaceAllString(s, "${1}xxxxx")
	if !strings.Contains(s, "://") {
		return s // a key/value string, or a path
	}
	u, err := url.Parse(s)
	if err != nil {
		if strings.Contains(s, "@") {
			return "(a database URL that does not parse)"
		}
		return s
	}
	return u.Redacted()
}

// passwordValue is a password=VALUE or sslpassword=VALUE pair, in a query
// or a key/value string.
var passwordValue = regexp.MustCompile(`(?i)((?:^|[?&\s])(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]*)`)

// parseInterspersed parses flags that may come before or after positional
// arguments ("merchant update ID --status x"), and returns the positionals.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// unexpectedArgument is the usage error of a stray argument arg among
// args. After a boolean flag ("--test-mode false") it says why: Go's
// boolean flags take their value only after "=", and "false" is then an
// argument of its own.
func unexpectedArgument(fs *flag.FlagSet, args []string, arg string) error {
	name := strings.TrimPrefix(fs.Name(), "xaalis ")
	if _, err := strconv.ParseBool(arg); err == nil {
		for i := 1; i < len(args); i++ {
			if args[i] != arg {
				continue
			}
			prev := strings.TrimLeft(args[i-1], "-")
			f := fs.Lookup(prev)
			if f == nil || strings.Contains(args[i-1], "=") {
				continue
			}
			if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
				return usagef("%s: unexpected argument %q (a boolean flag takes its value after \"=\": --%s=%s)", name, arg, prev, arg)
			}
		}
	}
	return usagef("%s: unexpected argument %q", name, arg)
}

// parseFlags parses a command that takes flags only, wherever they stand,
// and refuses any other argument: a stray word would otherwise end the
// flags, and those after it would go unread (another database, another
// address).
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) > 0 {
		return unexpectedArgument(fs, args, pos[0])
	}
	return nil
}

// openStore opens the Store a database URL names, applies migrations, and
// gives it the keyring of the command's key file (keySetup, from
// XAALIS_SECRET_KEY_FILE), refusing a key file that cannot read the
// database's secrets.
func openStore(ctx context.Context, url string) (xaalis.Store, error) {
	s, _, err := openStoreKeyed(ctx, url, true)
	return s, err
}

// openStoreOnly opens the Store a database URL names and applies
// migrations; its secrets cannot be read until it is given a keyring.
func openStoreOnly(ctx context.Context, url string) (xaalis.Store, error) {
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		return postgres.Open(ctx, url)
	case strings.HasPrefix(url, "sqlite:"):
		path, err := sqlite.ParseURL(url)
		if err != nil {
			return nil, err
		}
		return sqlite.Open(ctx, path)
	}
	return nil, usagef("database URL %q: expected sqlite://PATH or postgres://...", redactURL(url))
}

// existingDatabase refuses an SQLite URL whose file does not exist, and a
// PostgreSQL URL whose schema (its search_path's) holds no installation,
// for the commands that only read or change what a database holds:
// opening one creates and migrates it, so that a mistyped path or
// search_path made an empty backup, a "consistent" ledger check of
// nothing, or a whole installation in the wrong schema.
func existingDatabase(ctx context.Context, url string) error {
	if strings.HasPrefix(url, "postgres://") || strings.HasPrefix(url, "postgresql://") {
		schema, ok, err := postgres.Installed(ctx, url)
		switch {
		case err != nil:
			return err
		case !ok:
			return fmt.Errorf("no Xaalis installation in the schema %s of %s (check --database-url and its search_path; `xaalis migrate` makes one)", schema, redactURL(url))
		}
		return nil
	}
	if !strings.HasPrefix(url, "sqlite:") {
		return nil
	}
	path, err := sqlite.ParseURL(url)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database at %s (check --database-url)", path)
	} else if err != nil {
		return err
	}
	return nil
}

// withExistingApp is withApp for the commands that read or change what
// a database holds already: an SQLite path with no database is refused
// rather than made (a mistyped path would leave an empty database
// behind, and the command would find nothing in it).
func withExistingApp(ctx context.Context, db string, getenv func(string) string, fn func(*xaalis.App) error) error {
	return openApp(ctx, db, true, false, getenv, fn)
}

// withEventsApp is withExistingApp for the operator's commands that write
// events (a payment marked refunded, a dispute decided, a payout request
// moved): the App's public address is serve's XAALIS_PUBLIC_URL when
// set, so that those events carry the payment_url the server's would.
func withEventsApp(ctx context.Context, db string, getenv func(string) string, fn func(*xaalis.App) error) error {
	return openApp(ctx, db, true, true, getenv, fn)
}

// withApp opens the database a command names and runs fn with an App on
// it.
func withApp(ctx context.Context, db string, getenv func(string) string, fn func(*xaalis.App) error) error {
	return openApp(ctx, db, false, false, getenv, fn)
}

// openApp is withApp, and withExistingApp when existing is set; with
// events, it reads XAALIS_PUBLIC_URL (withEventsApp), and a bad one is a
// bad command line, refused before the database is looked at. The other
// commands leave it alone: README names those that read it.
func openApp(ctx context.Context, db string, existing, events bool, getenv func(string) string, fn func(*xaalis.App) error) error {
	u := ""
	if events {
		var err error
		if u, err = publicBase(getenv("XAALIS_PUBLIC_URL")); err != nil {
			return err
		}
	}
	if existing {
		if err := existingDatabase(ctx, db); err != nil {
			return err
		}
	}
	s, err := openStore(ctx, db)
	if err != nil {
		return err
	}
	defer s.Close()
	app := xaalis.NewApp(s)
	if u != "" {
		app.BaseURL = u
	}
	return fn(app)
}

// publicBase checks a public base URL (--public-url, XAALIS_PUBLIC_URL):
// "" (the default), or an absolute http or https URL with a host and
// nothing after its path. Payment URLs and the providers' notification
// URL are built on it, so that "notaurl" gave payments a payment_url of
// "notaurl/checkout/…".
func publicBase(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", usagef("--public-url (XAALIS_PUBLIC_URL) %q: expected an http:// or https:// URL with a host, such as https://pay.example.com", s)
	}
	return strings.TrimRight(s, "/"), nil
}

// boolEnv parses a boolean environment variable.
func boolEnv(getenv func(string) string, name string, def bool) (bool, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, usagef("%s=%q: expected true or false", name, v)
	}
	return b, nil
}

// splitComma splits a comma-separated flag value, dropping empty items.
func splitComma(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// setFlags reports which flags were given on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	m := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { m[f.Name] = true })
	return m
}

// describe renders a domain error for a terminal. A validation_error
// whose every field is one of flags (the fields the command fills from
// its command line as given) is a bad command line (exit status 2); one
// about the state of things, a failure.
func describe(err error, flags ...string) error {
	var e *xaalis.Error
	if ok := asXaalis(err, &e); ok && e.Code == xaalis.EValidation {
		var parts []string
		usage := len(e.Fields) > 0
		for f, msgs := range e.Fields {
			parts = append(parts, f+" "+strings.Join(msgs, ", "))
			usage = usage && slices.Contains(flags, f)
		}
		sort.Strings(parts)
		msg := "invalid: " + strings.Join(parts, "; ")
		if usage {
			return usageError{msg}
		}
		return errors.New(msg)
	}
	return err
}
