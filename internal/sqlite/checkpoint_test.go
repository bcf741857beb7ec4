package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestRestartRetryAt: a RESTART that readers held off waits restartRetry
// before the next try; one that failed otherwise (the disk full) is tried
// at the next poll, so that the WAL starts over as soon as space returns.
func TestRestartRetryAt(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name string
		err  error
		want time.Time
	}{
		{"readers held on", errRestartBusy, now.Add(restartRetry)},
		{"readers held on, wrapped", fmt.Errorf("restart: %w", errRestartBusy), now.Add(restartRetry)},
		{"another failure", errors.New("database or disk is full (13)"), now},
	} {
		if got := restartRetryAt(c.err, now); !got.Equal(c.want) {
			t.Errorf("%s: retry at %v, want %v", c.name, got, c.want)
		}
	}
}
