package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// RegisterInstance records a server instance, or renews its row.
func (s *Store) RegisterInstance(ctx context.Context, i *xaalis.Instance) error {
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT INTO server_instances (id, host, pid, process, started_at, heartbeat_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at`,
			i.ID, i.Host, i.PID, i.Process, micros(i.StartedAt), micros(i.HeartbeatAt))
		if err != nil {
			return fmt.Errorf("register instance: %w", err)
		}
		return nil
	})
}

// HeartbeatInstance sets an instance's heartbeat; ErrNotFound when its row
// is gone.
func (s *Store) HeartbeatInstance(ctx context.Context, id string, at time.Time) error {
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		res, err := xtx.(*Tx).tx.ExecContext(ctx, `UPDATE server_instances SET heartbeat_at = ? WHERE id = ?`, micros(at), id)
		if err != nil {
			return fmt.Errorf("instance heartbeat: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return xaalis.ErrNotFound
		}
		return nil
	})
}

// RemoveInstance deletes an instance's row.
func (s *Store) RemoveInstance(ctx context.Context, id string) error {
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		if _, err := xtx.(*Tx).tx.ExecContext(ctx, `DELETE FROM server_instances WHERE id = ?`, id); err != nil {
			return fmt.Errorf("remove instance: %w", err)
		}
		return nil
	})
}

// Instances lists every instance row, oldest first.
func (s *Store) Instances(ctx context.Context) ([]*xaalis.Instance, error) {
	return queryAll(ctx, s.read, "list instances", func(scan func(...any) error) (*xaalis.Instance, error) {
		var i xaalis.Instance
		var started, beat int64
		if err := scan(&i.ID, &i.Host, &i.PID, &i.Process, &started, &beat); err != nil {
			return nil, err
		}
		i.StartedAt, i.HeartbeatAt = fromMicros(started), fromMicros(beat)
		return &i, nil
	}, `SELECT id, host, pid, process, started_at, heartbeat_at FROM server_instances ORDER BY started_at, id`)
}
