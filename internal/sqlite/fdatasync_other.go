//go:build !linux

package sqlite

import "os"

// Fdatasync falls back to fsync where the system has no fdatasync.
func Fdatasync(f *os.File) error { return f.Sync() }
