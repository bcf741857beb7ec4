package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const endpointColumns = `id, merchant_id, mode, url, description, events, payload_format, secret, previous_secret,
	previous_expires_at, created_at, updated_at, deleted_at`

func scanEndpoint(sc func(...any) error) (*xaalis.WebhookEndpoint, error) {
	var w xaalis.WebhookEndpoint
	var events string
	var prevExp, deleted sql.NullInt64
	var created, updated int64
	if err := sc(&w.ID, &w.MerchantID, &w.Mode, &w.URL, &w.Description, &events, &w.Format, &w.Secret,
		&w.PreviousSecret, &prevExp, &created, &updated, &deleted); err != nil {
		return nil, notFound(err)
	}
	w.Events = splitList(events)
	w.PreviousExpiresAt, w.DeletedAt = fromNullMicros(prevExp), fromNullMicros(deleted)
	w.CreatedAt, w.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &w, nil
}

// queryEndpoints lists endpoints with their secrets opened.
func queryEndpoints(ctx context.Context, q querier, box xaalis.SecretBox, query string, args ...any) ([]*xaalis.WebhookEndpoint, error) {
	list, err := queryAll(ctx, q, "list webhook endpoints", scanEndpoint, query, args...)
	if err != nil {
		return nil, err
	}
	for _, w := range list {
		if err := xaalis.OpenEndpointSecrets(box, w); err != nil {
			return nil, err
		}
	}
	return list, nil
}

func getEndpoint(ctx context.Context, q querier, box xaalis.SecretBox, merchantID, id string) (*xaalis.WebhookEndpoint, error) {
	w, err := scanEndpoint(q.QueryRowContext(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE merchant_id = ? AND id = ? AND deleted_at IS NULL`, merchantID, id).Scan)
	if err != nil {
		return nil, err
	}
	return w, xaalis.OpenEndpointSecrets(box, w)
}

// activeEndpoints are the merchant's endpoints in a mode, not deleted,
// oldest first.
func activeEndpoints(ctx context.Context, q querier, box xaalis.SecretBox, merchantID string, mode xaalis.Mode) ([]*xaalis.WebhookEndpoint, error) {
	return queryEndpoints(ctx, q, box, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE merchant_id = ? AND mode = ? AND deleted_at IS NULL ORDER BY created_at, id`, merchantID, mode)
}

// WebhookEndpoint returns one of the merchant's endpoints, in either mode,
// unless it is deleted.
func (s *Store) WebhookEndpoint(ctx context.Context, merchantID, id string) (*xaalis.WebhookEndpoint, error) {
	return getEndpoint(ctx, s.read, s.secretBox(), merchantID, id)
}

// WebhookEndpoints lists the merchant's endpoints in a mode, not deleted,
// oldest first.
func (s *Store) WebhookEndpoints(ctx context.Context, merchantID string, mode xaalis.Mode) ([]*xaalis.WebhookEndpoint, error) {
	return activeEndpoints(ctx, s.read, s.secretBox(), merchantID, mode)
}

// sealEndpoint returns an endpoint's secrets sealed under the current key.
func (t *Tx) sealEndpoint(ctx context.Context, w *xaalis.WebhookEndpoint) (secret, previous string, err error) {
	kid, err := currentSecretKey(ctx, t.tx, t.box)
	if err != nil {
		return "", "", err
	}
	return xaalis.SealEndpointSecrets(t.box, kid, w)
}

// InsertWebhookEndpoint stores a new endpoint, its secret sealed.
func (t *Tx) InsertWebhookEndpoint(ctx context.Context, w *xaalis.WebhookEndpoint) error {
	secret, previous, err := t.sealEndpoint(ctx, w)
	if err != nil {
		return err
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO webhook_endpoints (`+endpointColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		w.ID, w.MerchantID, w.Mode, w.URL, w.Description, strings.Join(w.Events, ","), w.Format, secret,
		previous, nullMicros(w.PreviousExpiresAt), micros(w.CreatedAt), micros(w.UpdatedAt),
		nullMicros(w.DeletedAt))
	if err != nil {
		return fmt.Errorf("insert webhook endpoint: %w", err)
	}
	return nil
}

// WebhookEndpointForUpdate reads an endpoint that is not deleted inside the
// write transaction, which already holds SQLite's single write lock.
func (t *Tx) WebhookEndpointForUpdate(ctx context.Context, merchantID, id string) (*xaalis.WebhookEndpoint, error) {
	return getEndpoint(ctx, t.tx, t.box, merchantID, id)
}

// UpdateWebhookEndpoint writes an endpoint's mutable fields; setting
// DeletedAt deletes it. A deleted endpoint is not found.
func (t *Tx) UpdateWebhookEndpoint(ctx context.Context, w *xaalis.WebhookEndpoint) error {
	secret, previous, err := t.sealEndpoint(ctx, w)
	if err != nil {
		return err
	}
	res, err := t.tx.ExecContext(ctx, `UPDATE webhook_endpoints SET url = ?, description = ?, events = ?,
		payload_format = ?, secret = ?, previous_secret = ?, previous_expires_at = ?, updated_at = ?, deleted_at = ?
		WHERE merchant_id = ? AND id = ? AND deleted_at IS NULL`,
		w.URL, w.Description, strings.Join(w.Events, ","), w.Format, secret, previous,
		nullMicros(w.PreviousExpiresAt), micros(w.UpdatedAt), nullMicros(w.DeletedAt), w.MerchantID, w.ID)
	if err != nil {
		return fmt.Errorf("update webhook endpoint: %w", err)
	}
	return oneRow(res)
}

// LockWebhookEndpoints does nothing: SQLite's one writer runs one command
// at a time, so creations of endpoints already count each other's.
func (t *Tx) LockWebhookEndpoints(ctx context.Context, merchantID string, mode xaalis.Mode) error {
	return nil
}

// ActiveWebhookEndpoints lists the merchant's endpoints in a mode, not
// deleted, oldest first, with their secrets opened.
func (t *Tx) ActiveWebhookEndpoints(ctx context.Context, merchantID string, mode xaalis.Mode) ([]*xaalis.WebhookEndpoint, error) {
	return activeEndpoints(ctx, t.tx, t.box, merchantID, mode)
}

// InsertFanOut stores ev's deliveries to the endpoints subscribed to it
// (xaalis.WebhookTx). It reads only what a delivery copies: the secrets
// stay sealed, which saves opening them for every event.
func (t *Tx) InsertFanOut(ctx context.Context, ev *xaalis.Event, newID xaalis.IDGen) error {
	eps, err := queryAll(ctx, t.tx, "read fan-out endpoints", func(sc func(...any) error) (*xaalis.WebhookEndpoint, error) {
		var w xaalis.WebhookEndpoint
		var events string
		if err := sc(&w.ID, &w.URL, &events, &w.Format); err != nil {
			return nil, err
		}
		w.Events = splitList(events)
		return &w, nil
	}, `SELECT id, url, events, payload_format FROM webhook_endpoints
		WHERE merchant_id = ? AND mode = ? AND deleted_at IS NULL ORDER BY created_at, id`, ev.MerchantID, ev.Mode)
	if err != nil {
		return err
	}
	for _, w := range eps {
		if !w.Subscribed(ev.Type) {
			continue
		}
		d := &xaalis.Delivery{ID: newID(), EventID: ev.ID, MerchantID: ev.MerchantID, Mode: ev.Mode, EndpointID: w.ID,
			URL: w.URL, Format: w.Format, Status: xaalis.DeliveryPending, NextAttemptAt: ev.CreatedAt,
			CreatedAt: ev.CreatedAt, UpdatedAt: ev.CreatedAt}
		if err := t.InsertDelivery(ctx, d); err != nil {
			return err
		}
		t.Wake(xaalis.WakeDeliveries)
	}
	return nil
}

const eventColumns = `id, merchant_id, mode, type, object_type, object_id, seq, data, created_at`

func scanEvent(sc func(...any) error) (*xaalis.Event, error) {
	var e xaalis.Event
	var data string
	var created int64
	if err := sc(&e.ID, &e.MerchantID, &e.Mode, &e.Type, &e.ObjectType, &e.ObjectID, &e.Seq, &data, &created); err != nil {
		return nil, notFound(err)
	}
	e.Data, e.CreatedAt = json.RawMessage(data), fromMicros(created)
	return &e, nil
}

// Event returns one of the merchant's events, in either mode.
func (s *Store) Event(ctx context.Context, merchantID, id string) (*xaalis.Event, error) {
	return scanEvent(s.read.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events
		WHERE merchant_id = ? AND id = ?`, merchantID, id).Scan)
}

// EventByID returns an event of any merchant.
func (s *Store) EventByID(ctx context.Context, id string) (*xaalis.Event, error) {
	return scanEvent(s.read.QueryRowContext(ctx, `SELECT `+eventColumns+` FROM events WHERE id = ?`, id).Scan)
}

// ListEvents lists one page of a merchant's events in a mode, newest
// first, and the total.
func (s *Store) ListEvents(ctx context.Context, f xaalis.EventFilter, page xaalis.PageRequest) ([]*xaalis.Event, int, error) {
	where := []string{"merchant_id = ?", "mode = ?"}
	args := []any{f.MerchantID, f.Mode}
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.Type != "" {
		add("type = ?", f.Type)
	}
	if f.From != nil {
		add("created_at >= ?", micros(*f.From))
	}
	if f.To != nil {
		add("created_at < ?", micros(*f.To))
	}
	if f.DeliveryStatus != "" {
		// CAST: webhook_deliveries_due's WHERE compares status with a
		// literal (txListWhere).
		add("EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id AND d.status = CAST(? AS TEXT))", f.DeliveryStatus)
	}
	w := strings.Join(where, " AND ")
	var total int
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE `+w, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count events: %w", err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+eventColumns+` FROM events WHERE `+w+`
		ORDER BY created_at DESC, id DESC LIMIT +? OFFSET ?`, append(args, page.PerPage, page.Offset())...)
	if err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.Event
	for rows.Next() {
		e, err := scanEvent(rows.Scan)
		if err != nil {
			return nil, 0, fmt.Errorf("list events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list events: %w", err)
	}
	return out, total, nil
}

const deliveryColumns = `id, event_id, merchant_id, mode, endpoint_id, url, payload_format, status, attempts,
	next_attempt_at, last_attempt_at, created_at, updated_at`

func scanDelivery(sc func(...any) error) (*xaalis.Delivery, error) {
	var d xaalis.Delivery
	var endpoint sql.NullString
	var next, created, updated int64
	var last sql.NullInt64
	if err := sc(&d.ID, &d.EventID, &d.MerchantID, &d.Mode, &endpoint, &d.URL, &d.Format, &d.Status, &d.Attempts,
		&next, &last, &created, &updated); err != nil {
		return nil, notFound(err)
	}
	d.EndpointID, d.LastAttemptAt = endpoint.String, fromNullMicros(last)
	d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = fromMicros(next), fromMicros(created), fromMicros(updated)
	return &d, nil
}

func queryDeliveries(ctx context.Context, q querier, query string, args ...any) ([]*xaalis.Delivery, error) {
	return queryAll(ctx, q, "", scanDelivery, query, args...)
}

// InsertDelivery stores a new delivery, held by nobody.
func (t *Tx) InsertDelivery(ctx context.Context, d *xaalis.Delivery) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (`+deliveryColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		d.ID, d.EventID, d.MerchantID, d.Mode, nullString(d.EndpointID), d.URL, d.Format, d.Status, d.Attempts,
		micros(d.NextAttemptAt), nullMicros(d.LastAttemptAt), micros(d.CreatedAt), micros(d.UpdatedAt))
	if err != nil {
		return fmt.Errorf("insert delivery: %w", err)
	}
	return nil
}

// Deliveries returns an event's deliveries, oldest first.
func (s *Store) Deliveries(ctx context.Context, eventID string) ([]*xaalis.Delivery, error) {
	list, err := queryDeliveries(ctx, s.read, `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE event_id = ? ORDER BY created_at, id`, eventID)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return list, nil
}

// Attempts returns a delivery's attempts, oldest first.
func (s *Store) Attempts(ctx context.Context, deliveryID string) ([]*xaalis.Attempt, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, delivery_id, attempted_at, duration_ms, http_status, error_message
		FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempted_at, id`, deliveryID)
	if err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	defer rows.Close()
	var out []*xaalis.Attempt
	for rows.Next() {
		var a xaalis.Attempt
		var at int64
		if err := rows.Scan(&a.ID, &a.DeliveryID, &at, &a.DurationMS, &a.HTTPStatus, &a.ErrorMessage); err != nil {
			return nil, fmt.Errorf("list attempts: %w", err)
		}
		a.AttemptedAt = fromMicros(at)
		out = append(out, &a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list attempts: %w", err)
	}
	return out, nil
}

// ClaimDeliveries holds up to limit pending deliveries due at now that
// nobody holds until now+lease, and returns them, oldest due first. The
// select and the update are one statement in one write transaction, and
// SQLite has one writer at a time: two claimers never take the same
// delivery.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*xaalis.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	var list []*xaalis.Delivery
	err := s.Update(ctx, func(xtx xaalis.Tx) (err error) {
		list, err = queryDeliveries(ctx, xtx.(*Tx).tx, `UPDATE webhook_deliveries SET locked_until = ?
			WHERE id IN (SELECT id FROM webhook_deliveries
				WHERE status = 'pending' AND next_attempt_at <= ? AND locked_until <= ?
				ORDER BY next_attempt_at, id LIMIT +?)
			RETURNING `+deliveryColumns, micros(now.Add(lease)), micros(now), micros(now), limit)
		if err != nil {
			return fmt.Errorf("claim deliveries: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortDue(list)
	return list, nil
}

// sortDue orders claimed deliveries oldest due first: RETURNING has no
// order of its own.
func sortDue(list []*xaalis.Delivery) {
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if !a.NextAttemptAt.Equal(b.NextAttemptAt) {
			return a.NextAttemptAt.Before(b.NextAttemptAt)
		}
		return a.ID < b.ID
	})
}

// RecordAttempt stores an attempt and the delivery's new state, and
// releases the hold, in one transaction. A missing delivery is not found.
func (s *Store) RecordAttempt(ctx context.Context, d *xaalis.Delivery, a *xaalis.Attempt) error {
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		res, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = ?, next_attempt_at = ?,
			last_attempt_at = ?, updated_at = ?, locked_until = 0 WHERE id = ?`,
			d.Status, d.Attempts, micros(d.NextAttemptAt), nullMicros(d.LastAttemptAt), micros(d.UpdatedAt), d.ID)
		if err != nil {
			return fmt.Errorf("update delivery: %w", err)
		}
		if err := oneRow(res); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_attempts (id, delivery_id, attempted_at, duration_ms,
			http_status, error_message) VALUES (?, ?, ?, ?, ?, ?)`,
			a.ID, d.ID, micros(a.AttemptedAt), a.DurationMS, a.HTTPStatus, a.ErrorMessage); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		// The attempt is counted in the same transaction (the metrics'
		// xaalis_webhook_deliveries_total).
		day, shard, delta := xaalis.AttemptStat(d, a)
		return xtx.AddStats(ctx, day, shard, delta)
	})
}

// CallbackSecret returns the merchant's callback secret in a mode, storing
// fresh (sealed) on first use: of concurrent first callers, the first
// insert wins and all read it.
func (s *Store) CallbackSecret(ctx context.Context, merchantID string, mode xaalis.Mode, fresh string) (string, error) {
	return s.stableSecret(ctx, xaalis.SecretTableCallback, "callback secret", xaalis.CallbackSecretAAD(merchantID, mode),
		merchantID, mode, fresh)
}

// ListenSecret returns the merchant's `xaalis listen` secret in a mode,
// storing fresh (sealed) on first use, like CallbackSecret.
func (s *Store) ListenSecret(ctx context.Context, merchantID string, mode xaalis.Mode, fresh string) (string, error) {
	return s.stableSecret(ctx, xaalis.SecretTableListen, "listen secret", xaalis.ListenSecretAAD(merchantID, mode),
		merchantID, mode, fresh)
}

// stableSecret reads a secret kept sealed per merchant and mode in table,
// inserting fresh when there is none.
func (s *Store) stableSecret(ctx context.Context, table, what string, aad []byte, merchantID string, mode xaalis.Mode, fresh string) (string, error) {
	read := `SELECT secret FROM ` + table + ` WHERE merchant_id = ? AND mode = ?`
	box := s.secretBox()
	var v string
	err := s.read.QueryRowContext(ctx, read, merchantID, mode).Scan(&v)
	if err == nil {
		return xaalis.OpenSecret(box, v, aad)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	err = s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		kid, err := currentSecretKey(ctx, tx, box)
		if err != nil {
			return err
		}
		sealed, err := xaalis.SealSecret(box, kid, fresh, aad)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+table+` (merchant_id, mode, secret, created_at)
			VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, merchantID, mode, sealed, micros(time.Now())); err != nil {
			return fmt.Errorf("create %s: %w", what, err)
		}
		if err := tx.QueryRowContext(ctx, read, merchantID, mode).Scan(&v); err != nil {
			return fmt.Errorf("read %s: %w", what, err)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return xaalis.OpenSecret(box, v, aad)
}
