package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/xaalis/xaalis/internal/sqlite"
)

// cmdBackup makes an online copy of an SQLite database (VACUUM INTO)
// while servers run. PostgreSQL databases are backed up with pg_dump
// (docs/deployment.md). The copy holds the secrets encrypted: back the
// key file up apart.
func cmdBackup(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("backup", stderr)
	db := databaseFlag(fs, getenv)
	out := fs.String("output", "", "file to write the copy to; it must not exist (required)")
	if err := fs.Parse(args); err != nil {
		return parseError(err)
	}
	if *out == "" || fs.NArg() > 0 {
		return usagef("backup: --output FILE is required, and nothing else")
	}
	if !strings.HasPrefix(*db, "sqlite:") {
		return usagef("backup: %s is not an SQLite database; back PostgreSQL up with pg_dump (docs/deployment.md)", redactURL(*db))
	}
	if err := existingDatabase(ctx, *db); err != nil {
		return err
	}
	// openStore checks the key file, as every command that opens the
	// database does: a copy made with the wrong key at hand would not be
	// restorable with it.
	store, err := openStore(ctx, *db)
	if err != nil {
		return err
	}
	defer store.Close()
	s, ok := store.(*sqlite.Store)
	if !ok {
		return usagef("backup: %s is not an SQLite database; back PostgreSQL up with pg_dump (docs/deployment.md)", redactURL(*db))
	}
	if err := s.Backup(ctx, *out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Backup written to %s. It holds the secrets encrypted: keep a copy of the secret key file apart.\n", *out)
	return nil
}
