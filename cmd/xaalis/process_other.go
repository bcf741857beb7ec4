//go:build !unix

package main

// processAlive cannot tell on this platform: a dead instance's claims are
// then taken over once its heartbeat is old.
var processAlive func(pid int) bool
