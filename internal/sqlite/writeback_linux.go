package sqlite

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's dirty pages to the
// disk, and returns without waiting for them (sync_file_range with
// SYNC_FILE_RANGE_WRITE alone). It makes nothing durable and reports no
// writeback error: those stay for the next fsync of the file, SQLite's.
func startWriteback(f *os.File) error {
	return unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
}
