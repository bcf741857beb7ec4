package main

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestServeInstance: a running server is an instance in the database,
// with this process's PID, and a clean shutdown removes it, so that its
// keys (none, after a graceful stop) are free at once.
func TestServeInstance(t *testing.T) {
	eachBackend(t, func(t *testing.T, db string) {
		s := serve(t, noEnv, serveArgs(db, "--heartbeat", "100ms")...)
		store, err := openStoreOnly(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		list, err := store.Instances(context.Background())
		if err != nil || len(list) != 1 || list[0].PID != os.Getpid() || list[0].Process != processID {
			t.Fatalf("instances while serving: %+v %v", list, err)
		}
		first := list[0].HeartbeatAt
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			list, _ = store.Instances(context.Background())
			if len(list) == 1 && list[0].HeartbeatAt.After(first) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no heartbeat in 5 s")
			}
		}
		if err := s.stop(); err != nil {
			t.Fatal(err)
		}
		if list, err := store.Instances(context.Background()); err != nil || len(list) != 0 {
			t.Fatalf("instances after a clean shutdown: %+v %v", list, err)
		}
		_, _, err = cli(t, noEnv, "serve", "--database-url", db, "--heartbeat", "0s")
		wantErr(t, true, "", err)
	})
}
