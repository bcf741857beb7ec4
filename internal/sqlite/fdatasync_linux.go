package sqlite

import (
	"os"
	"syscall"
)

// Fdatasync flushes f's data (and its size), not its other metadata: what
// SQLite itself calls where the system has it. The syncer makes the WAL
// durable with it, and the bench's floor-fsync measures it.
func Fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
