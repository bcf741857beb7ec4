package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Secrets at rest: webhook endpoint secrets, callback secrets and stored
// answers that show a secret are sealed under the current key
// (settings.secret_key) with the SecretBox the store was given. Every
// process on the database reads the current key from it, so a rotation
// switches them all at once.

// SetSecretBox makes the store keep secrets sealed under box.
func (s *Store) SetSecretBox(box xaalis.SecretBox) { s.box = box }

// currentSecretKey returns the key new secrets are sealed under: the
// database's, or, for the first secret, the box's newest, recorded (of
// concurrent first callers, the first insert wins and all read it).
func currentSecretKey(ctx context.Context, q querier, box xaalis.SecretBox) (string, error) {
	if box == nil {
		return "", nil
	}
	const read = `SELECT value FROM settings WHERE name = '` + xaalis.SecretKeySetting + `'`
	var v []byte
	err := q.QueryRow(ctx, read).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		if _, err := q.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`,
			xaalis.SecretKeySetting, []byte(box.Newest())); err != nil {
			return "", fmt.Errorf("record the secret key: %w", err)
		}
		err = q.QueryRow(ctx, read).Scan(&v)
	}
	if err != nil {
		return "", fmt.Errorf("read the secret key: %w", err)
	}
	return string(v), nil
}

// secretMarker starts every webhook secret: a stored answer in clear
// holding it was stored before encryption at rest.
const secretMarker = "whsec_"

// clearAnswersSealed records that the answers stored in clear before
// encryption at rest were sealed (a scan done once).
const clearAnswersSealed = "secrets_clear_answers_sealed"

// SecretKeys reports the current key and the keys stored secrets are
// sealed under.
func (s *Store) SecretKeys(ctx context.Context, answers bool) (xaalis.SecretKeyUsage, error) {
	u := xaalis.SecretKeyUsage{Sealed: map[string]int{}}
	var cur []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, xaalis.SecretKeySetting).Scan(&cur)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return u, fmt.Errorf("read the secret key: %w", err)
	}
	u.Current = string(cur)
	count := func(query string, args ...any) error {
		rows, err := s.pool.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("count secrets: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id []byte
			var n int
			if err := rows.Scan(&id, &n); err != nil {
				return fmt.Errorf("count secrets: %w", err)
			}
			if len(id) == 0 {
				u.Clear += n
			} else {
				u.Sealed[string(id)] += n
			}
		}
		return rows.Err()
	}
	if err := count(`SELECT convert_to(CASE WHEN left(v, 7) = $1 THEN substr(v, 8, 16) ELSE '' END, 'UTF8') AS k, count(*)
		FROM (SELECT secret AS v FROM webhook_endpoints
			UNION ALL SELECT previous_secret FROM webhook_endpoints WHERE previous_secret <> ''
			UNION ALL SELECT secret FROM webhook_callback_secrets
			UNION ALL SELECT secret FROM webhook_listen_secrets) AS s
		GROUP BY k`, xaalis.SealedPrefix); err != nil {
		return u, err
	}
	if answers {
		if err := count(`SELECT substring(response_body from 8 for 16) AS k, count(*) FROM idempotency_keys
			WHERE substring(response_body from 1 for 7) = $1 GROUP BY k`, []byte(xaalis.SealedPrefix)); err != nil {
			return u, err
		}
		if err := count(`SELECT ''::bytea, count(*) FROM idempotency_keys
			WHERE substring(response_body from 1 for 7) <> $1 AND position($2::bytea in response_body) > 0`,
			[]byte(xaalis.SealedPrefix), []byte(secretMarker)); err != nil {
			return u, err
		}
	}
	return u, nil
}

// UseSecretKey makes id the key new secrets are sealed under.
func (s *Store) UseSecretKey(ctx context.Context, id string) error {
	if s.box == nil || !s.box.Has(id) {
		return fmt.Errorf("use secret key %s: the key file does not hold it", id)
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`, xaalis.SecretKeySetting, []byte(id))
	if err != nil {
		return fmt.Errorf("use secret key: %w", err)
	}
	return nil
}

// ResealSecrets seals up to limit secrets under the current key, in one
// transaction that locks the rows it changes; servers keep reading and
// writing the others meanwhile.
func (s *Store) ResealSecrets(ctx context.Context, limit int, clearOnly bool) (int, error) {
	if s.box == nil {
		return 0, errors.New("reseal secrets: no secret key file was given")
	}
	done := 0
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		done = 0
		cur, err := currentSecretKey(ctx, tx, s.box)
		if err != nil {
			return err
		}
		prefix := xaalis.SealedPrefix + cur + ":"
		stale := func(col string) string {
			if clearOnly {
				return "left(" + col + ", 7) <> '" + xaalis.SealedPrefix + "'"
			}
			return "left(" + col + ", 24) <> '" + prefix + "'"
		}
		reseal := func(v string, aad []byte) (string, error) {
			plain, err := xaalis.OpenSecret(s.box, v, aad)
			if err != nil {
				return "", err
			}
			return xaalis.SealSecret(s.box, cur, plain, aad)
		}

		type endpoint struct{ id, secret, previous string }
		eps, err := queryAll(ctx, tx, "find endpoint secrets", func(op string, row interface{ Scan(...any) error }) (endpoint, error) {
			var e endpoint
			return e, row.Scan(&e.id, &e.secret, &e.previous)
		}, `SELECT id, secret, previous_secret FROM webhook_endpoints
			WHERE `+stale("secret")+` OR (previous_secret <> '' AND `+stale("previous_secret")+`) LIMIT $1 FOR UPDATE`, limit)
		if err != nil {
			return err
		}
		for _, e := range eps {
			aad := xaalis.EndpointSecretAAD(e.id)
			secret, err := reseal(e.secret, aad)
			if err != nil {
				return fmt.Errorf("webhook endpoint %s: %w", e.id, err)
			}
			previous, err := reseal(e.previous, aad)
			if err != nil {
				return fmt.Errorf("webhook endpoint %s: %w", e.id, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE webhook_endpoints SET secret = $1, previous_secret = $2 WHERE id = $3`,
				secret, previous, e.id); err != nil {
				return fmt.Errorf("reseal webhook endpoint: %w", err)
			}
			done++
		}

		// The secrets kept per merchant and mode: callback and listen.
		type stable struct{ merchant, mode, secret string }
		for _, k := range []struct {
			table string
			aad   func(string, xaalis.Mode) []byte
		}{{xaalis.SecretTableCallback, xaalis.CallbackSecretAAD}, {xaalis.SecretTableListen, xaalis.ListenSecretAAD}} {
			list, err := queryAll(ctx, tx, "find "+k.table, func(op string, row interface{ Scan(...any) error }) (stable, error) {
				var c stable
				return c, row.Scan(&c.merchant, &c.mode, &c.secret)
			}, `SELECT merchant_id, mode, secret FROM `+k.table+` WHERE `+stale("secret")+` LIMIT $1 FOR UPDATE`,
				limit-done)
			if err != nil {
				return err
			}
			for _, c := range list {
				secret, err := reseal(c.secret, k.aad(c.merchant, xaalis.Mode(c.mode)))
				if err != nil {
					return fmt.Errorf("%s of %s (%s): %w", k.table, c.merchant, c.mode, err)
				}
				if _, err := tx.Exec(ctx, `UPDATE `+k.table+` SET secret = $1 WHERE merchant_id = $2 AND mode = $3`,
					secret, c.merchant, c.mode); err != nil {
					return fmt.Errorf("reseal %s: %w", k.table, err)
				}
				done++
			}
		}

		type answer struct {
			scope xaalis.IdempotencyScope
			body  []byte
		}
		scanAnswer := func(op string, row interface{ Scan(...any) error }) (answer, error) {
			var a answer
			return a, row.Scan(&a.scope.MerchantID, &a.scope.Mode, &a.scope.KeyType, &a.scope.Key, &a.body)
		}
		var answers []answer
		if !clearOnly && done < limit {
			answers, err = queryAll(ctx, tx, "find sealed answers", scanAnswer, `SELECT merchant_id, mode, key_type, key,
				response_body FROM idempotency_keys WHERE substring(response_body from 1 for 7) = $1
				AND substring(response_body from 1 for 24) <> $2 LIMIT $3 FOR UPDATE`,
				[]byte(xaalis.SealedPrefix), []byte(prefix), limit-done)
			if err != nil {
				return err
			}
		}
		// The answers stored in clear before encryption at rest: one scan.
		var scanned []byte
		err = tx.QueryRow(ctx, `SELECT value FROM settings WHERE name = $1`, clearAnswersSealed).Scan(&scanned)
		if errors.Is(err, pgx.ErrNoRows) && done+len(answers) < limit {
			n := limit - done - len(answers)
			clear, err := queryAll(ctx, tx, "find answers in clear", scanAnswer, `SELECT merchant_id, mode, key_type, key,
				response_body FROM idempotency_keys WHERE substring(response_body from 1 for 7) <> $1
				AND position($2::bytea in response_body) > 0 LIMIT $3 FOR UPDATE`,
				[]byte(xaalis.SealedPrefix), []byte(secretMarker), n)
			if err != nil {
				return err
			}
			answers = append(answers, clear...)
			if len(clear) < n {
				if _, err := tx.Exec(ctx, `INSERT INTO settings (name, value) VALUES ($1, '\x01') ON CONFLICT (name) DO NOTHING`,
					clearAnswersSealed); err != nil {
					return fmt.Errorf("record sealed answers: %w", err)
				}
			}
		} else if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("read setting: %w", err)
		}
		for _, a := range answers {
			body, err := reseal(string(a.body), xaalis.IdempotencyAAD(a.scope))
			if err != nil {
				return fmt.Errorf("stored answer of Idempotency-Key %q: %w", a.scope.Key, err)
			}
			if _, err := tx.Exec(ctx, `UPDATE idempotency_keys SET response_body = $1
				WHERE merchant_id = $2 AND mode = $3 AND key_type = $4 AND key = $5`, []byte(body),
				a.scope.MerchantID, a.scope.Mode, a.scope.KeyType, a.scope.Key); err != nil {
				return fmt.Errorf("reseal stored answer: %w", err)
			}
			done++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return done, nil
}
