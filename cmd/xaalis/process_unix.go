//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// processAlive reports whether a process with this PID runs on this
// machine (signal 0 checks without sending; EPERM: it runs as another
// user). A zombie, killed but not yet reaped by its parent, still answers
// signal 0 and runs nothing: where /proc tells (Linux), it counts as
// dead, so that a server restarted at once after a SIGKILL takes over the
// dead one's keys without waiting for its heartbeat to age.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !zombie(pid)
}

// zombie reports whether /proc says pid has exited and awaits its parent
// (state Z or X). Without /proc it reports false.
func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, so the
	// state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	switch stat[i+2] {
	case 'Z', 'X':
		return true
	}
	return false
}
