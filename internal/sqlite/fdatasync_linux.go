package sqlite

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and its size), not its other metadata: what
// SQLite itself calls where the system has it.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
