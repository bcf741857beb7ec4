package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// The stream orders events by the id of the transaction that inserted
// them (stream_xid), then by insertion (stream_pos). Transaction ids are
// handed out when transactions begin writing, not when they commit, so a
// reader only takes events of transactions below its snapshot's xmin:
// every transaction with a smaller id has ended, and no event can commit
// later with a place before one already read. A transaction still running
// holds the stream back until it ends; it is never skipped.

// maxHeadSkip bounds the committed events a new stream skips: more only
// while a writing transaction has run for very long, and then the oldest
// of them are sent again (delivery is at least once).
const maxHeadSkip = 10_000

// StreamHead is the oldest transaction still running: events of it and of
// later transactions are read after this cursor. Those of the merchant's
// events after it that committed already (their transaction began before
// another still running) are returned to be skipped. One statement, so
// one snapshot, reads both.
func (s *Store) StreamHead(ctx context.Context, merchantID string, mode xaalis.Mode) (xaalis.StreamCursor, []string, error) {
	rows, err := s.pool.Query(ctx, `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
		SELECT h.xmin::text, e.id FROM h
		LEFT JOIN LATERAL (SELECT id FROM events WHERE merchant_id = $1 AND mode = $2 AND stream_xid >= h.xmin
			ORDER BY stream_xid DESC, stream_pos DESC`+limitSQL(maxHeadSkip)+`) e ON true`, merchantID, mode)
	if err != nil {
		return xaalis.StreamCursor{}, nil, fmt.Errorf("stream head: %w", err)
	}
	defer rows.Close()
	var xmin string
	var skip []string
	for rows.Next() {
		var id *string
		if err := rows.Scan(&xmin, &id); err != nil {
			return xaalis.StreamCursor{}, nil, fmt.Errorf("stream head: %w", err)
		}
		if id != nil {
			skip = append(skip, *id)
		}
	}
	if err := rows.Err(); err != nil {
		return xaalis.StreamCursor{}, nil, fmt.Errorf("stream head: %w", err)
	}
	x, err := strconv.ParseUint(xmin, 10, 64)
	if err != nil {
		return xaalis.StreamCursor{}, nil, fmt.Errorf("stream head: %w", err)
	}
	return xaalis.StreamCursor{Tx: x}, skip, nil // positions start at 1
}

func scanStreamed(op string, row interface{ Scan(...any) error }) (xaalis.StreamedEvent, error) {
	var xid string
	var pos int64
	e, err := scanEvent(op, scanWith{row, []any{&xid, &pos}})
	if err != nil {
		return xaalis.StreamedEvent{}, err
	}
	x, err := strconv.ParseUint(xid, 10, 64)
	if err != nil {
		return xaalis.StreamedEvent{}, fmt.Errorf("%s: %w", op, err)
	}
	return xaalis.StreamedEvent{Event: e, Cursor: xaalis.StreamCursor{Tx: x, Pos: pos}}, nil
}

// scanWith scans a row into the caller's destinations, then extra ones.
type scanWith struct {
	row   interface{ Scan(...any) error }
	extra []any
}

func (s scanWith) Scan(dst ...any) error { return s.row.Scan(append(dst, s.extra...)...) }

// StreamCursorOf returns one of the merchant's events and its place.
func (s *Store) StreamCursorOf(ctx context.Context, merchantID, eventID string) (*xaalis.Event, xaalis.StreamCursor, error) {
	se, err := scanStreamed("read event", s.pool.QueryRow(ctx, `SELECT `+eventColumns+`, stream_xid::text, stream_pos
		FROM events WHERE merchant_id = $1 AND id = $2`, merchantID, eventID))
	if err != nil {
		return nil, xaalis.StreamCursor{}, err
	}
	return se.Event, se.Cursor, nil
}

// StreamLastBefore returns the merchant's newest event in a mode placed at
// or before the cursor.
func (s *Store) StreamLastBefore(ctx context.Context, merchantID string, mode xaalis.Mode, c xaalis.StreamCursor) (*xaalis.Event, error) {
	return scanEvent("stream last before", s.pool.QueryRow(ctx, `SELECT `+eventColumns+` FROM events
		WHERE merchant_id = $1 AND mode = $2 AND (stream_xid, stream_pos) <= ($3::text::xid8, $4)
		ORDER BY stream_xid DESC, stream_pos DESC LIMIT 1`, merchantID, mode, strconv.FormatUint(c.Tx, 10), c.Pos))
}

// StreamEvents returns up to limit of the merchant's events in a mode after
// the cursor, in stream order, from transactions that have all ended.
func (s *Store) StreamEvents(ctx context.Context, merchantID string, mode xaalis.Mode, after xaalis.StreamCursor, limit int) ([]xaalis.StreamedEvent, error) {
	return queryAll(ctx, s.pool, "stream events", scanStreamed, `SELECT `+eventColumns+`, stream_xid::text, stream_pos
		FROM events
		WHERE merchant_id = $1 AND mode = $2 AND (stream_xid, stream_pos) > ($3::text::xid8, $4)
		  AND stream_xid < pg_snapshot_xmin(pg_current_snapshot())
		ORDER BY stream_xid, stream_pos`+limitSQL(limit),
		merchantID, mode, strconv.FormatUint(after.Tx, 10), after.Pos)
}

// redeliveryQuery selects the latest delivery of each (event, URL) of the
// merchant's events matching f, in f's status, not to a deleted endpoint.
func redeliveryQuery(f xaalis.RedeliveryFilter) (string, []any) {
	var c conditions
	c.add("e.merchant_id = $%d", f.MerchantID)
	c.add("e.mode = $%d", f.Mode)
	if f.Type != "" {
		c.add("e.type = $%d", f.Type)
	}
	if f.From != nil {
		c.add("e.created_at >= $%d", *f.From)
	}
	if f.To != nil {
		c.add("e.created_at < $%d", *f.To)
	}
	if f.EndpointID != "" {
		c.add("d.endpoint_id = $%d", f.EndpointID)
	}
	inner := c.String()
	var o conditions
	o.args = c.args
	o.where = []string{"l.rn = 1", "(l.endpoint_id IS NULL OR w.deleted_at IS NULL)"}
	if f.DeliveryStatus != "" {
		o.add("l.status = $%d", f.DeliveryStatus)
	}
	return `WITH latest AS (
		SELECT d.event_id, d.endpoint_id, d.url, d.payload_format, d.status, e.created_at AS event_created,
			row_number() OVER (PARTITION BY d.event_id, coalesce(d.endpoint_id, ''), d.url
				ORDER BY d.created_at DESC, d.id DESC) AS rn
		FROM webhook_deliveries d JOIN events e ON e.id = d.event_id
		WHERE ` + inner + `)
	SELECT l.event_id, l.endpoint_id, l.url, l.payload_format, l.event_created
	FROM latest l LEFT JOIN webhook_endpoints w ON w.id = l.endpoint_id
	WHERE ` + o.String(), o.args
}

// RedeliveryTargets counts the events with a delivery matching f and, when
// there are at most max, returns one delivery per event and URL.
func (t *Tx) RedeliveryTargets(ctx context.Context, f xaalis.RedeliveryFilter, max int) (int, []*xaalis.Delivery, error) {
	q, args := redeliveryQuery(f)
	var n int
	if err := t.tx.QueryRow(ctx, `SELECT count(DISTINCT event_id) FROM (`+q+`) AS matched`, args...).Scan(&n); err != nil {
		return 0, nil, fmt.Errorf("count redeliveries: %w", err)
	}
	if n == 0 || n > max {
		return n, nil, nil
	}
	list, err := queryAll(ctx, t.tx, "redelivery targets", func(op string, row interface{ Scan(...any) error }) (*xaalis.Delivery, error) {
		var d xaalis.Delivery
		var endpoint *string
		var created any
		if err := row.Scan(&d.EventID, &endpoint, &d.URL, &d.Format, &created); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		if endpoint != nil {
			d.EndpointID = *endpoint
		}
		return &d, nil
	}, q+` ORDER BY l.event_created, l.event_id, coalesce(l.endpoint_id, ''), l.url`, args...)
	if err != nil {
		return 0, nil, err
	}
	return n, list, nil
}
