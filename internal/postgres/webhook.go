package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const endpointColumns = `id, merchant_id, mode, url, description, events, payload_format, secret, previous_secret,
	previous_expires_at, created_at, updated_at, deleted_at`

func scanEndpoint(op string, row interface{ Scan(...any) error }) (*xaalis.WebhookEndpoint, error) {
	var w xaalis.WebhookEndpoint
	if err := row.Scan(&w.ID, &w.MerchantID, &w.Mode, &w.URL, &w.Description, &w.Events, &w.Format, &w.Secret,
		&w.PreviousSecret, &w.PreviousExpiresAt, &w.CreatedAt, &w.UpdatedAt, &w.DeletedAt); err != nil {
		return nil, notFound(op, err)
	}
	w.Events = nilIfEmpty(w.Events)
	w.PreviousExpiresAt, w.DeletedAt = utcPtr(w.PreviousExpiresAt), utcPtr(w.DeletedAt)
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
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

func getEndpoint(ctx context.Context, q querier, box xaalis.SecretBox, merchantID, id string, lock string) (*xaalis.WebhookEndpoint, error) {
	w, err := scanEndpoint("read webhook endpoint", q.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE merchant_id = $1 AND id = $2 AND deleted_at IS NULL`+lock, merchantID, id))
	if err != nil {
		return nil, err
	}
	return w, xaalis.OpenEndpointSecrets(box, w)
}

// activeEndpoints are the merchant's endpoints in a mode, not deleted,
// oldest first.
func activeEndpoints(ctx context.Context, q querier, box xaalis.SecretBox, merchantID string, mode xaalis.Mode) ([]*xaalis.WebhookEndpoint, error) {
	return queryEndpoints(ctx, q, box, `SELECT `+endpointColumns+` FROM webhook_endpoints
		WHERE merchant_id = $1 AND mode = $2 AND deleted_at IS NULL ORDER BY created_at, id`, merchantID, mode)
}

// WebhookEndpoint returns one of the merchant's endpoints, in either mode,
// unless it is deleted.
func (s *Store) WebhookEndpoint(ctx context.Context, merchantID, id string) (*xaalis.WebhookEndpoint, error) {
	return getEndpoint(ctx, s.pool, s.box, merchantID, id, "")
}

// WebhookEndpoints lists the merchant's endpoints in a mode, not deleted,
// oldest first.
func (s *Store) WebhookEndpoints(ctx context.Context, merchantID string, mode xaalis.Mode) ([]*xaalis.WebhookEndpoint, error) {
	return activeEndpoints(ctx, s.pool, s.box, merchantID, mode)
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
	_, err = t.tx.Exec(ctx, `INSERT INTO webhook_endpoints (`+endpointColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		w.ID, w.MerchantID, w.Mode, w.URL, w.Description, nonNil(w.Events), w.Format, secret, previous,
		w.PreviousExpiresAt, w.CreatedAt, w.UpdatedAt, w.DeletedAt)
	if err != nil {
		return fmt.Errorf("insert webhook endpoint: %w", err)
	}
	return nil
}

// WebhookEndpointForUpdate reads an endpoint that is not deleted and locks
// its row until the transaction ends.
func (t *Tx) WebhookEndpointForUpdate(ctx context.Context, merchantID, id string) (*xaalis.WebhookEndpoint, error) {
	return getEndpoint(ctx, t.tx, t.box, merchantID, id, ` FOR UPDATE`)
}

// UpdateWebhookEndpoint writes an endpoint's mutable fields; setting
// DeletedAt deletes it. A deleted endpoint is not found.
func (t *Tx) UpdateWebhookEndpoint(ctx context.Context, w *xaalis.WebhookEndpoint) error {
	secret, previous, err := t.sealEndpoint(ctx, w)
	if err != nil {
		return err
	}
	tag, err := t.tx.Exec(ctx, `UPDATE webhook_endpoints SET url = $1, description = $2, events = $3,
		payload_format = $4, secret = $5, previous_secret = $6, previous_expires_at = $7, updated_at = $8,
		deleted_at = $9 WHERE merchant_id = $10 AND id = $11 AND deleted_at IS NULL`,
		w.URL, w.Description, nonNil(w.Events), w.Format, secret, previous, w.PreviousExpiresAt,
		w.UpdatedAt, w.DeletedAt, w.MerchantID, w.ID)
	return oneRow("update webhook endpoint", tag, err)
}

// endpointLockClass is the advisory locks' class of LockWebhookEndpoints.
const endpointLockClass = 0x7861_7765 // "xawe"

// LockWebhookEndpoints takes a transaction-level advisory lock on the
// merchant's endpoints in mode: under READ COMMITTED, two creations at once
// each counted the endpoints before the other's insert (thirty requests
// made 28 endpoints where an account has at most 16).
func (t *Tx) LockWebhookEndpoints(ctx context.Context, merchantID string, mode xaalis.Mode) error {
	_, err := t.tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, endpointLockClass, merchantID+":"+string(mode))
	return err
}

// ActiveWebhookEndpoints lists the merchant's endpoints in a mode, not
// deleted, oldest first, with their secrets opened.
func (t *Tx) ActiveWebhookEndpoints(ctx context.Context, merchantID string, mode xaalis.Mode) ([]*xaalis.WebhookEndpoint, error) {
	return activeEndpoints(ctx, t.tx, t.box, merchantID, mode)
}

// InsertFanOut stores ev's deliveries to the endpoints subscribed to it
// (xaalis.WebhookTx) in one statement sent with the next one: reading the
// endpoints first cost every event a round trip. WebhookEndpoint.Subscribed
// is written again in SQL (subscribedEndpoints); the storetest FanOut test
// holds the two to one answer. The NOTIFY goes out only when a
// delivery was stored, and PostgreSQL sends it at COMMIT.
func (t *Tx) InsertFanOut(ctx context.Context, ev *xaalis.Event, newID xaalis.IDGen) error {
	ids := make([]string, xaalis.MaxWebhookEndpoints)
	for i := range ids {
		ids[i] = newID()
	}
	t.tx.queued = append(t.tx.queued, queued{op: "fan out", rows: fanOutRows{}, sql: fanOutSQL,
		args: []any{ids, ev.ID, ev.MerchantID, ev.Mode, xaalis.DeliveryPending, ev.CreatedAt, ev.Type,
			t.wakeChannel, strconv.Itoa(int(xaalis.WakeDeliveries))}})
	return nil
}

// fanOutRows merges the fan-outs of a batch's events (group.go) into one
// statement: the events unnested, each joined to its merchant's endpoints
// subscribed to it, the deliveries named by each event's IDs made ahead
// (MaxWebhookEndpoints of them an event, flattened).
type fanOutRows struct{}

func (fanOutRows) merged(rows [][]any) (string, []any) {
	n := len(rows)
	ids := make([]string, 0, n*xaalis.MaxWebhookEndpoints)
	events, merchants, modes, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	at := make([]time.Time, n)
	for i, r := range rows {
		ids = append(ids, r[0].([]string)...)
		events[i], merchants[i], modes[i] = r[1].(string), r[2].(string), string(r[3].(xaalis.Mode))
		at[i], types[i] = r[5].(time.Time), r[6].(string)
	}
	first := rows[0]
	return fanOutManySQL, []any{ids, events, merchants, modes, at, types, first[4], first[7], first[8]}
}

// subscribedEndpoints is the endpoints of merchant and mode subscribed to
// an event of type typ, numbered n in their order (w): the fan-out of one
// event and that of a batch's events share it, so that the rule
// (WebhookEndpoint.Subscribed: no events, "*" or the type) is written in
// SQL once.
func subscribedEndpoints(merchant, mode, typ string) string {
	return `(SELECT id, url, payload_format, row_number() OVER (ORDER BY created_at, id) AS n
			FROM webhook_endpoints
			WHERE merchant_id = ` + merchant + ` AND mode = ` + mode + ` AND deleted_at IS NULL
				AND (cardinality(events) = 0 OR events && ARRAY['*', ` + typ + `])) AS w`
}

// fanOutNotified ends a fan-out whose inserts are d: the NOTIFY ($8, $9)
// goes out only when a delivery was stored.
const fanOutNotified = `
		RETURNING 1)
	SELECT pg_notify($8, $9) FROM (SELECT 1 FROM d LIMIT 1) AS stored`

// fanOutSQL is InsertFanOut's statement.
var fanOutSQL = `WITH d AS (
		INSERT INTO webhook_deliveries (` + deliveryColumns + `)
		SELECT coalesce(($1::text[])[w.n], gen_random_uuid()::text), $2, $3, $4, w.id, w.url, w.payload_format,
			$5, 0, $6, NULL, $6, $6
		FROM ` + subscribedEndpoints("$3", "$4", "$7::text") + fanOutNotified

// fanOutManySQL is fanOutRows' statement.
var fanOutManySQL = `WITH d AS (
		INSERT INTO webhook_deliveries (` + deliveryColumns + `)
		SELECT coalesce(CASE WHEN w.n <= ` + strconv.Itoa(xaalis.MaxWebhookEndpoints) + ` THEN ($1::text[])[(e.k - 1) * ` +
	strconv.Itoa(xaalis.MaxWebhookEndpoints) + ` + w.n] END, gen_random_uuid()::text),
			e.id, e.merchant_id, e.mode, w.id, w.url, w.payload_format, $7, 0, e.at, NULL, e.at, e.at
		FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::text[]) WITH ORDINALITY
			AS e (id, merchant_id, mode, at, type, k)
		CROSS JOIN LATERAL ` + subscribedEndpoints("e.merchant_id", "e.mode", "e.type") + `
		ORDER BY e.k, w.n` + fanOutNotified

const eventColumns = `id, merchant_id, mode, type, object_type, object_id, seq, data, created_at`

func scanEvent(op string, row interface{ Scan(...any) error }) (*xaalis.Event, error) {
	var e xaalis.Event
	var data string
	if err := row.Scan(&e.ID, &e.MerchantID, &e.Mode, &e.Type, &e.ObjectType, &e.ObjectID, &e.Seq, &data,
		&e.CreatedAt); err != nil {
		return nil, notFound(op, err)
	}
	e.Data, e.CreatedAt = json.RawMessage(data), e.CreatedAt.UTC()
	return &e, nil
}

// Event returns one of the merchant's events, in either mode.
func (s *Store) Event(ctx context.Context, merchantID, id string) (*xaalis.Event, error) {
	return scanEvent("read event", s.pool.QueryRow(ctx, `SELECT `+eventColumns+` FROM events
		WHERE merchant_id = $1 AND id = $2`, merchantID, id))
}

// EventByID returns an event of any merchant.
func (s *Store) EventByID(ctx context.Context, id string) (*xaalis.Event, error) {
	return scanEvent("read event", s.pool.QueryRow(ctx, `SELECT `+eventColumns+` FROM events WHERE id = $1`, id))
}

// ListEvents lists one page of a merchant's events in a mode, newest
// first, and the total.
func (s *Store) ListEvents(ctx context.Context, f xaalis.EventFilter, page xaalis.PageRequest) ([]*xaalis.Event, int, error) {
	var c conditions
	c.add("merchant_id = $%d", f.MerchantID)
	c.add("mode = $%d", f.Mode)
	if f.Type != "" {
		c.add("type = $%d", f.Type)
	}
	if f.From != nil {
		c.add("created_at >= $%d", *f.From)
	}
	if f.To != nil {
		c.add("created_at < $%d", *f.To)
	}
	if f.DeliveryStatus != "" {
		c.add("EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id AND d.status = $%d)", f.DeliveryStatus)
	}
	w := c.String()
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE `+w, c.args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count events: %w", err)
	}
	const op = "list events"
	tail, args := pageSQL(page, c.args...)
	rows, err := s.pool.Query(ctx, `SELECT `+eventColumns+` FROM events WHERE `+w+`
		ORDER BY created_at DESC, id DESC`+tail, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []*xaalis.Event
	for rows.Next() {
		e, err := scanEvent(op, rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", op, err)
	}
	return out, total, nil
}

const deliveryColumns = `id, event_id, merchant_id, mode, endpoint_id, url, payload_format, status, attempts,
	next_attempt_at, last_attempt_at, created_at, updated_at`

func scanDelivery(op string, row interface{ Scan(...any) error }) (*xaalis.Delivery, error) {
	var d xaalis.Delivery
	var endpoint *string
	if err := row.Scan(&d.ID, &d.EventID, &d.MerchantID, &d.Mode, &endpoint, &d.URL, &d.Format, &d.Status,
		&d.Attempts, &d.NextAttemptAt, &d.LastAttemptAt, &d.CreatedAt, &d.UpdatedAt); err != nil {
		return nil, notFound(op, err)
	}
	if endpoint != nil {
		d.EndpointID = *endpoint
	}
	d.NextAttemptAt, d.LastAttemptAt = d.NextAttemptAt.UTC(), utcPtr(d.LastAttemptAt)
	d.CreatedAt, d.UpdatedAt = d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	return &d, nil
}

func queryDeliveries(ctx context.Context, q querier, op, query string, args ...any) ([]*xaalis.Delivery, error) {
	return queryAll(ctx, q, op, scanDelivery, query, args...)
}

// InsertDelivery stores a new delivery, held by nobody.
//
// It is sent with the transaction's next statement or its COMMIT: an
// error (a missing event) fails the transaction there.
func (t *Tx) InsertDelivery(ctx context.Context, d *xaalis.Delivery) error {
	t.tx.later("insert delivery", `INSERT INTO webhook_deliveries (`+deliveryColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		d.ID, d.EventID, d.MerchantID, d.Mode, nullString(d.EndpointID), d.URL, d.Format, d.Status, d.Attempts,
		d.NextAttemptAt, d.LastAttemptAt, d.CreatedAt, d.UpdatedAt)
	return nil
}

// Deliveries returns an event's deliveries, oldest first.
func (s *Store) Deliveries(ctx context.Context, eventID string) ([]*xaalis.Delivery, error) {
	return queryDeliveries(ctx, s.pool, "list deliveries", `SELECT `+deliveryColumns+` FROM webhook_deliveries
		WHERE event_id = $1 ORDER BY created_at, id`, eventID)
}

// Attempts returns a delivery's attempts, oldest first.
func (s *Store) Attempts(ctx context.Context, deliveryID string) ([]*xaalis.Attempt, error) {
	const op = "list attempts"
	rows, err := s.pool.Query(ctx, `SELECT id, delivery_id, attempted_at, duration_ms, http_status, error_message
		FROM webhook_attempts WHERE delivery_id = $1 ORDER BY attempted_at, id`, deliveryID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	defer rows.Close()
	var out []*xaalis.Attempt
	for rows.Next() {
		var a xaalis.Attempt
		if err := rows.Scan(&a.ID, &a.DeliveryID, &a.AttemptedAt, &a.DurationMS, &a.HTTPStatus, &a.ErrorMessage); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		a.AttemptedAt = a.AttemptedAt.UTC()
		out = append(out, &a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return out, nil
}

// ClaimDeliveries holds up to limit pending deliveries due at now that
// nobody holds until now+lease, and returns them, oldest due first.
//
// One statement selects and holds them: the subquery locks the rows it
// picks and skips those another claimer has locked, and a row another
// claimer held and committed meanwhile is re-checked against locked_until
// and dropped. Claimers in other processes never take the same delivery.
func (s *Store) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, limit int) ([]*xaalis.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	list, err := queryDeliveries(ctx, s.pool, "claim deliveries", `UPDATE webhook_deliveries SET locked_until = $1
		WHERE id IN (SELECT id FROM webhook_deliveries
			WHERE status = 'pending' AND next_attempt_at <= $2 AND locked_until <= $2
			ORDER BY next_attempt_at, id`+limitSQL(limit)+` FOR UPDATE SKIP LOCKED)
		RETURNING `+deliveryColumns, now.Add(lease), now)
	if err != nil {
		return nil, err
	}
	// RETURNING has no order of its own.
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if !a.NextAttemptAt.Equal(b.NextAttemptAt) {
			return a.NextAttemptAt.Before(b.NextAttemptAt)
		}
		return a.ID < b.ID
	})
	return list, nil
}

// RecordAttempt stores an attempt and the delivery's new state, and
// releases the hold, in one transaction. A missing delivery is not found.
func (s *Store) RecordAttempt(ctx context.Context, d *xaalis.Delivery, a *xaalis.Attempt) error {
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		tag, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET status = $1, attempts = $2, next_attempt_at = $3,
			last_attempt_at = $4, updated_at = $5, locked_until = $6 WHERE id = $7`,
			d.Status, d.Attempts, d.NextAttemptAt, d.LastAttemptAt, d.UpdatedAt, epoch, d.ID)
		if err := oneRow("update delivery", tag, err); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO webhook_attempts (id, delivery_id, attempted_at, duration_ms,
			http_status, error_message) VALUES ($1, $2, $3, $4, $5, $6)`,
			a.ID, d.ID, a.AttemptedAt, a.DurationMS, a.HTTPStatus, a.ErrorMessage); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		// The attempt is counted in the same transaction (the metrics'
		// xaalis_webhook_deliveries_total).
		day, shard, delta := xaalis.AttemptStat(d, a)
		return xtx.AddStats(ctx, day, shard, delta)
	})
}

// CallbackSecret returns the merchant's callback secret in a mode, storing
// fresh (sealed) on first use. Of concurrent first callers, the first
// insert wins (the others wait for it to commit, then do nothing) and all
// read it.
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
	read := `SELECT secret FROM ` + table + ` WHERE merchant_id = $1 AND mode = $2`
	var v string
	err := s.pool.QueryRow(ctx, read, merchantID, mode).Scan(&v)
	if err == nil {
		return xaalis.OpenSecret(s.box, v, aad)
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	kid, err := currentSecretKey(ctx, s.pool, s.box)
	if err != nil {
		return "", err
	}
	sealed, err := xaalis.SealSecret(s.box, kid, fresh, aad)
	if err != nil {
		return "", err
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+table+` (merchant_id, mode, secret, created_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT (merchant_id, mode) DO NOTHING`, merchantID, mode, sealed, time.Now()); err != nil {
		return "", fmt.Errorf("create %s: %w", what, err)
	}
	if err := s.pool.QueryRow(ctx, read, merchantID, mode).Scan(&v); err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	return xaalis.OpenSecret(s.box, v, aad)
}
