package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// SQLite has one writer at a time, so stream_pos (numbered inside the
// inserting transaction by InsertEvent) is the order
// events committed in: a reader that sees an event sees every event
// numbered before it.

// StreamHead is the number of the last event committed; nothing after it
// committed already.
func (s *Store) StreamHead(ctx context.Context, merchantID string, mode xaalis.Mode) (xaalis.StreamCursor, []string, error) {
	var pos sql.NullInt64
	if err := s.read.QueryRowContext(ctx, `SELECT max(stream_pos) FROM events`).Scan(&pos); err != nil {
		return xaalis.StreamCursor{}, nil, fmt.Errorf("stream head: %w", err)
	}
	return xaalis.StreamCursor{Pos: pos.Int64}, nil, nil
}

// StreamCursorOf returns one of the merchant's events and its number.
func (s *Store) StreamCursorOf(ctx context.Context, merchantID, eventID string) (*xaalis.Event, xaalis.StreamCursor, error) {
	var pos int64
	e, err := scanEvent(func(dst ...any) error {
		return s.read.QueryRowContext(ctx, `SELECT `+eventColumns+`, stream_pos FROM events
			WHERE merchant_id = ? AND id = ?`, merchantID, eventID).Scan(append(dst, &pos)...)
	})
	if err != nil {
		return nil, xaalis.StreamCursor{}, err
	}
	return e, xaalis.StreamCursor{Pos: pos}, nil
}

// StreamLastBefore returns the merchant's newest event in a mode numbered
// at or before the cursor.
func (s *Store) StreamLastBefore(ctx context.Context, merchantID string, mode xaalis.Mode, c xaalis.StreamCursor) (*xaalis.Event, error) {
	return scanEvent(s.read.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events
		WHERE merchant_id = ? AND mode = ? AND stream_pos <= ? ORDER BY stream_pos DESC LIMIT 1`, merchantID, mode, c.Pos).Scan)
}

// StreamEvents returns up to limit of the merchant's events in a mode
// numbered after the cursor, in order.
func (s *Store) StreamEvents(ctx context.Context, merchantID string, mode xaalis.Mode, after xaalis.StreamCursor, limit int) ([]xaalis.StreamedEvent, error) {
	return queryAll(ctx, s.read, "stream events", func(sc func(...any) error) (xaalis.StreamedEvent, error) {
		var pos int64
		e, err := scanEvent(func(dst ...any) error { return sc(append(dst, &pos)...) })
		if err != nil {
			return xaalis.StreamedEvent{}, err
		}
		return xaalis.StreamedEvent{Event: e, Cursor: xaalis.StreamCursor{Pos: pos}}, nil
	}, `SELECT `+eventColumns+`, stream_pos FROM events
		WHERE merchant_id = ? AND mode = ? AND stream_pos > ? ORDER BY stream_pos LIMIT +?`,
		merchantID, mode, after.Pos, limit)
}

// redeliveryQuery selects the latest delivery of each (event, URL) of the
// merchant's events matching f, in f's status, not to a deleted endpoint.
func redeliveryQuery(f xaalis.RedeliveryFilter) (string, []any) {
	where := []string{"e.merchant_id = ?", "e.mode = ?"}
	args := []any{f.MerchantID, f.Mode}
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.Type != "" {
		add("e.type = ?", f.Type)
	}
	if f.From != nil {
		add("e.created_at >= ?", micros(*f.From))
	}
	if f.To != nil {
		add("e.created_at < ?", micros(*f.To))
	}
	if f.EndpointID != "" {
		add("d.endpoint_id = ?", f.EndpointID)
	}
	outer := "l.rn = 1 AND (l.endpoint_id IS NULL OR w.deleted_at IS NULL)"
	if f.DeliveryStatus != "" {
		outer += " AND l.status = ?"
		args = append(args, f.DeliveryStatus)
	}
	return `WITH latest AS (
		SELECT d.event_id, d.endpoint_id, d.url, d.payload_format, d.status, e.created_at AS event_created,
			row_number() OVER (PARTITION BY d.event_id, coalesce(d.endpoint_id, ''), d.url
				ORDER BY d.created_at DESC, d.id DESC) AS rn
		FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		WHERE ` + strings.Join(where, " AND ") + `)
	SELECT l.event_id, l.endpoint_id, l.url, l.payload_format, l.event_created
	FROM latest l LEFT JOIN webhook_endpoints w ON w.id = l.endpoint_id
	WHERE ` + outer, args
}

// RedeliveryTargets counts the events with a delivery matching f and, when
// there are at most max, returns one delivery per event and URL.
func (t *Tx) RedeliveryTargets(ctx context.Context, f xaalis.RedeliveryFilter, max int) (int, []*xaalis.Delivery, error) {
	q, args := redeliveryQuery(f)
	var n int
	if err := t.tx.QueryRowContext(ctx, `SELECT count(DISTINCT event_id) FROM (`+q+`)`, args...).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count redeliveries: %w", err)
	}
	if n == 0 || n > max {
		return n, nil, nil
	}
	list, err := queryAll(ctx, t.tx, "redelivery targets", func(sc func(...any) error) (*xaalis.Delivery, error) {
		var d xaalis.Delivery
		var endpoint sql.NullString
		var created int64
		if err := sc(&d.EventID, &endpoint, &d.URL, &d.Format, &created); err != nil {
			return nil, err
		}
		d.EndpointID = endpoint.String
		return &d, nil
	}, q+` ORDER BY l.event_created, l.event_id, coalesce(l.endpoint_id, ''), l.url`, args...)
	if err != nil {
		return 0, nil, err
	}
	return n, list, nil
}
