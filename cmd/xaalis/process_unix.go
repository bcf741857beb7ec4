//go:build unix

package main

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this PID runs on this
// machine (signal 0 checks without sending; EPERM: it runs as another
// user).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
