package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/xaalis/xaalis/internal/secrets"
	"github.com/xaalis/xaalis/internal/sqlite"
	"github.com/xaalis/xaalis/internal/xaalis"
)

// Secrets at rest (docs/deployment.md): every command that opens the
// database gives it the keyring of the operator's key file,
// XAALIS_SECRET_KEY_FILE (--secret-key-file on serve and the secrets
// commands). Without one, the key file is secret.key in the data
// directory (beside the SQLite database; ./xaalis-data for PostgreSQL),
// and serve warns about it at every start. A key file that does not
// exist yet is made, with one fresh key.

// secretKeyFileName is the key file's name in the data directory.
const secretKeyFileName = "secret.key"

// keySetup is how a command finds its key file; run puts it in the
// context from the environment.
type keySetup struct {
	file   string    // XAALIS_SECRET_KEY_FILE or --secret-key-file; "" for the data directory's
	stderr io.Writer // where a command says it made a key file
}

type keySetupKey struct{}

func withKeySetup(ctx context.Context, k keySetup) context.Context {
	return context.WithValue(ctx, keySetupKey{}, k)
}

func keySetupFrom(ctx context.Context) keySetup {
	k, _ := ctx.Value(keySetupKey{}).(keySetup)
	if k.stderr == nil {
		k.stderr = io.Discard
	}
	return k
}

// secretKeyFlag adds --secret-key-file, defaulting to
// XAALIS_SECRET_KEY_FILE; apply it with withKeyFile after parsing.
func secretKeyFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	return fs.String("secret-key-file", getenv("XAALIS_SECRET_KEY_FILE"),
		"file of the keys that encrypt the secrets kept in the database; empty: secret.key in the data directory, made on first use (env XAALIS_SECRET_KEY_FILE)")
}

// withKeyFile returns ctx with the key file a flag named.
func withKeyFile(ctx context.Context, file string) context.Context {
	k := keySetupFrom(ctx)
	k.file = file
	return withKeySetup(ctx, k)
}

// keyInfo says where a command's key file came from.
type keyInfo struct {
	keyring   *secrets.Keyring
	supplied  bool // the operator named it
	generated bool // made now, in the data directory
}

// defaultKeyFile is the data directory's key file for a database URL.
func defaultKeyFile(dbURL string) string {
	if strings.HasPrefix(dbURL, "sqlite:") {
		if path, err := sqlite.ParseURL(dbURL); err == nil {
			return filepath.Join(filepath.Dir(path), secretKeyFileName)
		}
	}
	return filepath.Join(filepath.Dir(strings.TrimPrefix(defaultDatabaseURL, "sqlite://")), secretKeyFileName)
}

// loadKeyring loads the command's key file, making it on first use.
// needed, when not nil, returns the keys the database's secrets are
// already under: a missing file is then not made (a new key would read
// none of them), and the error says which key file to give.
func loadKeyring(ctx context.Context, dbURL string, needed func() ([]string, error)) (keyInfo, error) {
	ks := keySetupFrom(ctx)
	path, supplied := ks.file, ks.file != ""
	if !supplied {
		path = defaultKeyFile(dbURL)
	}
	kr, err := secrets.Load(path)
	if errors.Is(err, fs.ErrNotExist) && needed != nil {
		ids, nerr := needed()
		if nerr != nil {
			return keyInfo{}, nerr
		}
		if len(ids) > 0 {
			return keyInfo{}, fmt.Errorf("no secret key file at %s: the database's secrets are encrypted under key %s; "+
				"give the key file this database was set up with (XAALIS_SECRET_KEY_FILE; serve and the secrets commands also take --secret-key-file; docs/deployment.md)",
				path, strings.Join(ids, ", "))
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		if kr, err = secrets.Create(path); err == nil {
			fmt.Fprintf(ks.stderr, "xaalis: made the secret key file %s; back it up apart from the database\n", path)
			return keyInfo{keyring: kr, supplied: supplied, generated: true}, nil
		}
	}
	if err != nil {
		return keyInfo{}, err
	}
	return keyInfo{keyring: kr, supplied: supplied}, nil
}

// openStoreKeyed opens the database with the command's keyring and, when
// check is set, refuses a key file that lacks a key the database's
// secrets are under.
func openStoreKeyed(ctx context.Context, dbURL string, check bool) (xaalis.Store, keyInfo, error) {
	store, err := openStoreOnly(ctx, dbURL)
	if err != nil {
		return nil, keyInfo{}, err
	}
	ki, err := loadKeyring(ctx, dbURL, func() ([]string, error) {
		u, err := store.SecretKeys(ctx, false)
		return u.SecretRequiredKeys(), err
	})
	if err != nil {
		store.Close()
		return nil, keyInfo{}, err
	}
	store.SetSecretBox(ki.keyring)
	if check {
		if err := checkSecretKeys(ctx, store, ki.keyring); err != nil {
			store.Close()
			return nil, keyInfo{}, err
		}
	}
	return store, ki, nil
}

// checkSecretKeys fails, saying which keys are missing, when the key
// file does not hold every key the database's secrets are under.
func checkSecretKeys(ctx context.Context, store xaalis.Store, kr *secrets.Keyring) error {
	u, err := store.SecretKeys(ctx, false)
	if err != nil {
		return err
	}
	var missing []string
	for _, id := range u.SecretRequiredKeys() {
		if !kr.Has(id) {
			missing = append(missing, id)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("wrong secret key file: the database's secrets are encrypted under key %s, which %s does not hold (it holds %s); "+
		"start with the key file this database was set up with (XAALIS_SECRET_KEY_FILE, docs/deployment.md)",
		strings.Join(missing, ", "), kr.Path(), strings.Join(kr.IDs(), ", "))
}

func cmdSecrets(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("secrets: expected rotate, add-key or status")
	}
	switch args[0] {
	case "rotate":
		return cmdSecretsRotate(ctx, args[1:], getenv, stdout, stderr)
	case "add-key":
		return cmdSecretsAddKey(ctx, args[1:], getenv, stdout, stderr)
	case "status":
		return cmdSecretsStatus(ctx, args[1:], getenv, stdout, stderr)
	}
	return usagef("secrets: unknown subcommand %q (expected rotate, add-key or status)", args[0])
}

// cmdSecretsAddKey appends a key to the key file. It does not encrypt
// anything until `secrets rotate --no-new-key` makes it current: copy the
// file to every server first.
func cmdSecretsAddKey(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("secrets add-key", stderr)
	db := databaseFlag(fs, getenv)
	keyFile := secretKeyFlag(fs, getenv)
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args, fs.Arg(0))
	}
	path := *keyFile
	if path == "" {
		// The data directory's key file: beside a database that must
		// exist, or a mistyped path makes a directory and a key file no
		// server reads.
		if err := existingDatabase(ctx, *db); err != nil {
			return err
		}
		path = defaultKeyFile(*db)
	}
	id, err := secrets.AddKey(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Key %s added to %s. It encrypts nothing yet: copy the file to every server, then run `xaalis secrets rotate --no-new-key`.\n", id, path)
	return nil
}

// cmdSecretsRotate makes a new key current and re-encrypts every secret
// under it, in small transactions, while servers keep running: they read
// the key file again when they meet the new key.
func cmdSecretsRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("secrets rotate", stderr)
	db := databaseFlag(fs, getenv)
	keyFile := secretKeyFlag(fs, getenv)
	noNewKey := fs.Bool("no-new-key", false, "make the key file's newest key current instead of adding one (several servers: after 'secrets add-key' and copying the file to each; or to finish an interrupted rotation)")
	batch := fs.Int("batch", 200, "secrets re-encrypted per transaction")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if fs.NArg() > 0 {
		return unexpectedArgument(fs, args, fs.Arg(0))
	}
	if *batch < 1 {
		return usagef("secrets rotate: --batch must be at least 1")
	}
	ctx = withKeyFile(ctx, *keyFile)
	if err := existingDatabase(ctx, *db); err != nil {
		return err
	}
	store, ki, err := openStoreKeyed(ctx, *db, true)
	if err != nil {
		return err
	}
	defer store.Close()
	id := ki.keyring.Newest()
	if !*noNewKey {
		if id, err = secrets.AddKey(ki.keyring.Path()); err != nil {
			return err
		}
		if !ki.keyring.Has(id) {
			return fmt.Errorf("the new key %s is not in %s after writing it", id, ki.keyring.Path())
		}
		fmt.Fprintf(stdout, "Key %s added to %s.\n", id, ki.keyring.Path())
	}
	if err := store.UseSecretKey(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "New secrets are encrypted under key %s.\n", id)
	total := 0
	// Until a count finds every secret under the new key: a server that
	// read the former key just before the switch may still write one.
	for pass := 0; ; pass++ {
		for {
			n, err := store.ResealSecrets(ctx, *batch, false)
			if err != nil {
				return fmt.Errorf("re-encrypt secrets (%d done): %w", total, err)
			}
			if n == 0 {
				break
			}
			total += n
		}
		u, err := store.SecretKeys(ctx, true)
		if err != nil {
			return err
		}
		others := u.Clear
		for k, n := range u.Sealed {
			if k != id {
				others += n
			}
		}
		if others == 0 {
			fmt.Fprintf(stdout, "Re-encrypted %d secrets: all %d are under key %s.\n", total, u.Sealed[id], id)
			break
		}
		if pass == 5 {
			return fmt.Errorf("secrets under other keys remain after %d passes: %+v", pass+1, u)
		}
	}
	if old := slices.DeleteFunc(ki.keyring.IDs(), func(k string) bool { return k == id }); len(old) > 0 {
		fmt.Fprintf(stdout, "The older keys (%s) encrypt nothing now; remove them from %s once every server uses key %s.\n",
			strings.Join(old, ", "), ki.keyring.Path(), id)
	}
	return nil
}

// cmdSecretsStatus shows the key file's keys and the database's use of
// them; it fails when the database needs a key the file lacks.
func cmdSecretsStatus(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("secrets status", stderr)
	db := databaseFlag(fs, getenv)
	keyFile := secretKeyFlag(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ctx = withKeyFile(ctx, *keyFile)
	if err := existingDatabase(ctx, *db); err != nil {
		return err
	}
	store, ki, err := openStoreKeyed(ctx, *db, false)
	if err != nil {
		return err
	}
	defer store.Close()
	u, err := store.SecretKeys(ctx, true)
	if err != nil {
		return err
	}
	type keyRow struct {
		ID      string `json:"id"`
		InFile  bool   `json:"in_key_file"`
		Current bool   `json:"current"`
		Secrets int    `json:"secrets"`
	}
	var rows []keyRow
	seen := map[string]bool{}
	for _, id := range append(ki.keyring.IDs(), u.SecretRequiredKeys()...) {
		if seen[id] {
			continue
		}
		seen[id] = true
		rows = append(rows, keyRow{ID: id, InFile: slices.Contains(ki.keyring.IDs(), id), Current: id == u.Current, Secrets: u.Sealed[id]})
	}
	var missing []string
	for _, r := range rows {
		if !r.InFile && (r.Current || r.Secrets > 0) {
			missing = append(missing, r.ID)
		}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(struct {
			KeyFile  string   `json:"key_file"`
			Keys     []keyRow `json:"keys"`
			InClear  int      `json:"secrets_in_clear"`
			Missing  []string `json:"missing_keys"`
			Complete bool     `json:"ok"`
		}{ki.keyring.Path(), rows, u.Clear, append([]string{}, missing...), len(missing) == 0}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "Key file: %s\n", ki.keyring.Path())
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tIN FILE\tCURRENT\tSECRETS")
		yes := func(b bool) string {
			if b {
				return "yes"
			}
			return "no"
		}
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", r.ID, yes(r.InFile), yes(r.Current), r.Secrets)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if u.Clear > 0 {
			fmt.Fprintf(stdout, "%d secrets are stored in clear (from before encryption at rest): `xaalis serve` encrypts them at start.\n", u.Clear)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the key file lacks key %s, which the database needs", strings.Join(missing, ", "))
	}
	return nil
}
