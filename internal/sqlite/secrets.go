package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Secrets at rest: webhook endpoint secrets, callback secrets and stored
// answers that show a secret are sealed under the current key
// (settings.secret_key) with the SecretBox the store was given.

// SetSecretBox makes the store keep secrets sealed under box.
func (s *Store) SetSecretBox(box xaalis.SecretBox) {
	s.boxMu.Lock()
	s.box = box
	s.boxMu.Unlock()
}

// secretBox is the store's SecretBox, for the writer's commands.
func (s *Store) secretBox() xaalis.SecretBox {
	s.boxMu.RLock()
	defer s.boxMu.RUnlock()
	return s.box
}

// currentSecretKey returns the key new secrets are sealed under: the
// database's, or, for the first secret, the box's newest, recorded.
func currentSecretKey(ctx context.Context, q querier, box xaalis.SecretBox) (string, error) {
	if box == nil {
		return "", nil
	}
	const read = `SELECT value FROM settings WHERE name = '` + xaalis.SecretKeySetting + `'`
	var v []byte
	err := q.QueryRowContext(ctx, read).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := q.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT DO NOTHING`,
			xaalis.SecretKeySetting, []byte(box.Newest())); err != nil {
			return "", fmt.Errorf("record the secret key: %w", err)
		}
		err = q.QueryRowContext(ctx, read).Scan(&v)
	}
	if err != nil {
		return "", fmt.Errorf("read the secret key: %w", err)
	}
	return string(v), nil
}

// SecretKeys reports the current key and the keys stored secrets are
// sealed under.
func (s *Store) SecretKeys(ctx context.Context, answers bool) (xaalis.SecretKeyUsage, error) {
	u := xaalis.SecretKeyUsage{Sealed: map[string]int{}}
	var cur []byte
	err := s.read.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, xaalis.SecretKeySetting).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return u, fmt.Errorf("read the secret key: %w", err)
	}
	u.Current = string(cur)
	count := func(query string, args ...any) error {
		rows, err := s.read.QueryContext(ctx, query, args...)
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
	if err := count(`SELECT CASE WHEN substr(v, 1, 7) = ? THEN substr(v, 8, 16) ELSE '' END AS k, count(*) FROM (
			SELECT secret AS v FROM webhook_endpoints
			UNION ALL SELECT previous_secret FROM webhook_endpoints WHERE previous_secret <> ''
			UNION ALL SELECT secret FROM webhook_callback_secrets
			UNION ALL SELECT secret FROM webhook_listen_secrets
		) GROUP BY k`, xaalis.SealedPrefix); err != nil {
		return u, err
	}
	if answers {
		if err := count(`SELECT substr(response_body, 8, 16) AS k, count(*) FROM idempotency_keys
			WHERE substr(response_body, 1, 7) = ? GROUP BY k`, []byte(xaalis.SealedPrefix)); err != nil {
			return u, err
		}
		if err := count(`SELECT '', count(*) FROM idempotency_keys
			WHERE substr(response_body, 1, 7) <> ? AND instr(response_body, ?) > 0`,
			[]byte(xaalis.SealedPrefix), []byte(secretMarker)); err != nil {
			return u, err
		}
	}
	return u, nil
}

// secretMarker starts every webhook secret: a stored answer in clear
// holding it was stored before encryption at rest.
const secretMarker = "whsec_"

// clearAnswersSealed records that the answers stored in clear before
// encryption at rest were sealed (a scan done once).
const clearAnswersSealed = "secrets_clear_answers_sealed"

// vacuumPending records that secrets in clear were sealed and the file is
// still to be written anew (ResealSecrets).
const vacuumPending = "secrets_vacuum_pending"

// UseSecretKey makes id the key new secrets are sealed under.
func (s *Store) UseSecretKey(ctx context.Context, id string) error {
	if s.secretBox() == nil || !s.secretBox().Has(id) {
		return fmt.Errorf("use secret key %s: the key file does not hold it", id)
	}
	return s.Update(ctx, func(xtx xaalis.Tx) error {
		_, err := xtx.(*Tx).tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value`, xaalis.SecretKeySetting, []byte(id))
		if err != nil {
			return fmt.Errorf("use secret key: %w", err)
		}
		return nil
	})
}

// ResealSecrets seals up to limit secrets under the current key.
func (s *Store) ResealSecrets(ctx context.Context, limit int, clearOnly bool) (int, error) {
	if s.secretBox() == nil {
		return 0, errors.New("reseal secrets: no secret key file was given")
	}
	// The rows replaced must not leave their former values (a secret in
	// clear, or under a key being retired) in the file's free space or in
	// the log: deleted content is zeroed meanwhile, and the log truncated.
	var secureDelete int
	if err := s.w.direct(ctx, func(q querier) error {
		if err := q.QueryRowContext(ctx, `PRAGMA secure_delete`).Scan(&secureDelete); err != nil {
			return fmt.Errorf("read secure_delete: %w", err)
		}
		if _, err := q.ExecContext(ctx, `PRAGMA secure_delete = ON`); err != nil {
			return fmt.Errorf("set secure_delete: %w", err)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	defer func() {
		_ = s.w.direct(context.WithoutCancel(ctx), func(q querier) error {
			_, err := q.ExecContext(ctx, fmt.Sprintf(`PRAGMA secure_delete = %d`, secureDelete))
			return err
		})
	}()
	done := 0
	err := s.Update(ctx, func(xtx xaalis.Tx) error {
		tx := xtx.(*Tx).tx
		done = 0
		cur, err := currentSecretKey(ctx, tx, s.secretBox())
		if err != nil {
			return err
		}
		prefix := xaalis.SealedPrefix + cur + ":"
		// stale: the value is not sealed (clearOnly) or not under cur.
		stale := func(col string) string {
			if clearOnly {
				return "substr(" + col + ", 1, 7) <> '" + xaalis.SealedPrefix + "'"
			}
			return "substr(" + col + ", 1, 24) <> '" + prefix + "'"
		}
		reseal := func(v string, aad []byte) (string, error) {
			plain, err := xaalis.OpenSecret(s.secretBox(), v, aad)
			if err != nil {
				return "", err
			}
			return xaalis.SealSecret(s.secretBox(), cur, plain, aad)
		}

		type endpoint struct{ id, secret, previous string }
		eps, err := queryAll(ctx, tx, "find endpoint secrets", func(sc func(...any) error) (endpoint, error) {
			var e endpoint
			return e, sc(&e.id, &e.secret, &e.previous)
		}, `SELECT id, secret, previous_secret FROM webhook_endpoints
			WHERE `+stale("secret")+` OR (previous_secret <> '' AND `+stale("previous_secret")+`) LIMIT +?`, limit)
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
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_endpoints SET secret = ?, previous_secret = ?
				WHERE id = ? AND secret = ? AND previous_secret = ?`, secret, previous, e.id, e.secret, e.previous); err != nil {
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
			list, err := queryAll(ctx, tx, "find "+k.table, func(sc func(...any) error) (stable, error) {
				var c stable
				return c, sc(&c.merchant, &c.mode, &c.secret)
			}, `SELECT merchant_id, mode, secret FROM `+k.table+` WHERE `+stale("secret")+` LIMIT +?`, limit-done)
			if err != nil {
				return err
			}
			for _, c := range list {
				secret, err := reseal(c.secret, k.aad(c.merchant, xaalis.Mode(c.mode)))
				if err != nil {
					return fmt.Errorf("%s of %s (%s): %w", k.table, c.merchant, c.mode, err)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE `+k.table+` SET secret = ?
					WHERE merchant_id = ? AND mode = ? AND secret = ?`, secret, c.merchant, c.mode, c.secret); err != nil {
					return fmt.Errorf("reseal %s: %w", k.table, err)
				}
				done++
			}
		}

		type answer struct {
			scope xaalis.IdempotencyScope
			body  []byte
		}
		scanAnswer := func(sc func(...any) error) (answer, error) {
			var a answer
			return a, sc(&a.scope.MerchantID, &a.scope.Mode, &a.scope.KeyType, &a.scope.Key, &a.body)
		}
		var answers []answer
		if !clearOnly && done < limit {
			answers, err = queryAll(ctx, tx, "find sealed answers", scanAnswer, `SELECT merchant_id, mode, key_type, key,
				response_body FROM idempotency_keys WHERE substr(response_body, 1, 7) = ? AND substr(response_body, 1, 24) <> ?
				LIMIT +?`, []byte(xaalis.SealedPrefix), []byte(prefix), limit-done)
			if err != nil {
				return err
			}
		}
		// The answers stored in clear before encryption at rest: one scan.
		var scanned []byte
		err = tx.QueryRowContext(ctx, `SELECT value FROM settings WHERE name = ?`, clearAnswersSealed).Scan(&scanned)
		if errors.Is(err, sql.ErrNoRows) && done+len(answers) < limit {
			n := limit - done - len(answers)
			clear, err := queryAll(ctx, tx, "find answers in clear", scanAnswer, `SELECT merchant_id, mode, key_type, key,
				response_body FROM idempotency_keys WHERE substr(response_body, 1, 7) <> ? AND instr(response_body, ?) > 0
				LIMIT +?`, []byte(xaalis.SealedPrefix), []byte(secretMarker), n)
			if err != nil {
				return err
			}
			answers = append(answers, clear...)
			if len(clear) < n {
				if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, X'01') ON CONFLICT DO NOTHING`,
					clearAnswersSealed); err != nil {
					return fmt.Errorf("record sealed answers: %w", err)
				}
			}
		} else if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("read setting: %w", err)
		}
		for _, a := range answers {
			body, err := reseal(string(a.body), xaalis.IdempotencyAAD(a.scope))
			if err != nil {
				return fmt.Errorf("stored answer of Idempotency-Key %q: %w", a.scope.Key, err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE idempotency_keys SET response_body = ?
				WHERE merchant_id = ? AND mode = ? AND key_type = ? AND key = ? AND response_body = ?`, []byte(body),
				a.scope.MerchantID, a.scope.Mode, a.scope.KeyType, a.scope.Key, a.body); err != nil {
				return fmt.Errorf("reseal stored answer: %w", err)
			}
			done++
		}
		if clearOnly && done > 0 {
			// Secrets in clear come from a database of an earlier version,
			// whose migrations rebuilt tables here: copies of their rows
			// lie in free pages and in the unused parts of reused ones,
			// which secure_delete never saw. The file is to be written anew
			// (VACUUM) once the run is over; recorded with the sealing, so
			// that a run cut short (a full disk, a signal) does it at the
			// next start.
			if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value) VALUES (?, X'01') ON CONFLICT DO NOTHING`,
				vacuumPending); err != nil {
				return fmt.Errorf("record vacuum: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	vacuum := false
	if clearOnly && done < limit {
		err := s.read.QueryRowContext(ctx, `SELECT 1 FROM settings WHERE name = ?`, vacuumPending).Scan(new(int))
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return done, fmt.Errorf("read setting: %w", err)
		}
		vacuum = err == nil
	}
	// Once the run is over (a short batch), write the log back and
	// truncate it, so that the former values leave it too.
	if done > 0 {
		s.resealed.Store(true)
	}
	if done < limit && (s.resealed.Swap(false) || vacuum) {
		if err := s.w.direct(ctx, func(q querier) error {
			if vacuum {
				if _, err := q.ExecContext(ctx, `VACUUM`); err != nil {
					return fmt.Errorf("vacuum: %w", err)
				}
				if _, err := q.ExecContext(ctx, `DELETE FROM settings WHERE name = ?`, vacuumPending); err != nil {
					return fmt.Errorf("vacuum done: %w", err)
				}
			}
			// Until it completes: a reader of the moment, or the
			// checkpointer's own run, leaves it busy, the former values
			// still in the file.
			for range 100 {
				var busy, log, copied int
				if err := q.QueryRowContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`).Scan(&busy, &log, &copied); err != nil {
					return err
				}
				if busy == 0 {
					return nil
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(50 * time.Millisecond):
				}
			}
			return errors.New("the log stayed busy for 5 s")
		}); err != nil {
			return done, fmt.Errorf("checkpoint: %w", err)
		}
	}
	return done, nil
}
