package bench

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and its size), not its other metadata: what
// SQLite and PostgreSQL call on Linux.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
