//go:build !linux

package sqlite

import "os"

// startWriteback does nothing where the system has no sync_file_range:
// SQLite's own fsync at the end of a checkpoint writes the pages.
func startWriteback(*os.File) error { return nil }
