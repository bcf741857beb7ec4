//go:build linux

package main

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestProcessAliveZombie: a child killed and not yet reaped (a zombie)
// counts as dead, as it runs nothing; a running one and this process as
// alive.
func TestProcessAliveZombie(t *testing.T) {
	if !processAlive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	t.Cleanup(func() {
		if !reaped {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	pid := cmd.Process.Pid
	if !processAlive(pid) {
		t.Fatal("a running child is not alive")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not reaped (no Wait yet): the child becomes a zombie once the kernel
	// has killed it.
	deadline := time.Now().Add(10 * time.Second)
	for !zombie(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the killed child never showed as a zombie")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if processAlive(pid) {
		t.Fatal("a zombie counts as alive")
	}
	_ = cmd.Wait()
	reaped = true
	if processAlive(pid) {
		t.Fatal("a reaped child counts as alive")
	}
}
