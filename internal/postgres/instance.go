package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// RegisterInstance records a server instance, or renews its row.
func (s *Store) RegisterInstance(ctx context.Context, i *xaalis.Instance) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO server_instances (id, host, pid, process, started_at, heartbeat_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
		i.ID, i.Host, i.PID, i.Process, i.StartedAt, i.HeartbeatAt)
	if err != nil {
		return unavailable(fmt.Errorf("register instance: %w", err))
	}
	return nil
}

// HeartbeatInstance sets an instance's heartbeat; ErrNotFound when its row
// is gone.
func (s *Store) HeartbeatInstance(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, `UPDATE server_instances SET heartbeat_at = $1 WHERE id = $2`, at, id)
	return unavailable(oneRow("instance heartbeat", tag, err))
}

// RemoveInstance deletes an instance's row.
func (s *Store) RemoveInstance(ctx context.Context, id string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM server_instances WHERE id = $1`, id); err != nil {
		return unavailable(fmt.Errorf("remove instance: %w", err))
	}
	return nil
}

// Instances lists every instance row, oldest first.
func (s *Store) Instances(ctx context.Context) ([]*xaalis.Instance, error) {
	out, err := queryAll(ctx, s.pool, "list instances", func(op string, row interface{ Scan(...any) error }) (*xaalis.Instance, error) {
		var i xaalis.Instance
		if err := row.Scan(&i.ID, &i.Host, &i.PID, &i.Process, &i.StartedAt, &i.HeartbeatAt); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		i.StartedAt, i.HeartbeatAt = i.StartedAt.UTC(), i.HeartbeatAt.UTC()
		return &i, nil
	}, `SELECT id, host, pid, process, started_at, heartbeat_at FROM server_instances ORDER BY started_at, id`)
	return out, unavailable(err)
}
