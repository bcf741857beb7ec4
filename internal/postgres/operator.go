package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const operatorTokenColumns = `id, name, hash, created_at, expires_at, revoked_at`

func scanOperatorToken(op string, row interface{ Scan(...any) error }) (*xaalis.OperatorToken, error) {
	var o xaalis.OperatorToken
	if err := row.Scan(&o.ID, &o.Name, &o.Hash, &o.CreatedAt, &o.ExpiresAt, &o.RevokedAt); err != nil {
		return nil, notFound(op, err)
	}
	o.CreatedAt, o.ExpiresAt, o.RevokedAt = o.CreatedAt.UTC(), utcPtr(o.ExpiresAt), utcPtr(o.RevokedAt)
	return &o, nil
}

// InsertOperatorToken stores an operator token.
func (t *Tx) InsertOperatorToken(ctx context.Context, o *xaalis.OperatorToken) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO operator_tokens (`+operatorTokenColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
		o.ID, o.Name, o.Hash, o.CreatedAt, o.ExpiresAt, o.RevokedAt)
	if err != nil {
		return fmt.Errorf("insert operator token: %w", err)
	}
	return nil
}

// OperatorTokenByHash finds an operator token by its hash.
func (s *Store) OperatorTokenByHash(ctx context.Context, hash []byte) (*xaalis.OperatorToken, error) {
	return scanOperatorToken("read operator token", s.pool.QueryRow(ctx, `SELECT `+operatorTokenColumns+`
		FROM operator_tokens WHERE hash = $1`, hash))
}

// OperatorTokens lists every operator token, newest first.
func (s *Store) OperatorTokens(ctx context.Context) ([]*xaalis.OperatorToken, error) {
	return queryAll(ctx, s.pool, "list operator tokens", scanOperatorToken,
		`SELECT `+operatorTokenColumns+` FROM operator_tokens ORDER BY created_at DESC, id DESC`)
}

// OperatorTokenForUpdate reads and locks a token.
func (t *Tx) OperatorTokenForUpdate(ctx context.Context, id string) (*xaalis.OperatorToken, error) {
	return scanOperatorToken("read operator token", t.tx.QueryRow(ctx, `SELECT `+operatorTokenColumns+`
		FROM operator_tokens WHERE id = $1 FOR UPDATE`, id))
}

// RevokeOperatorToken marks a token revoked.
func (t *Tx) RevokeOperatorToken(ctx context.Context, id string, at time.Time) error {
	tag, err := t.tx.Exec(ctx, `UPDATE operator_tokens SET revoked_at = $1 WHERE id = $2`, at, id)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return xaalis.ErrNotFound
	}
	return nil
}

// InsertAudit appends to the audit log.
func (t *Tx) InsertAudit(ctx context.Context, e *xaalis.AuditEntry) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO audit_log (id, at, actor, token_id, action, object_type, object_id,
		before, after, request_id, client_ip, note) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`, e.ID, e.At, e.Actor,
		e.TokenID, e.Action, e.ObjectType, e.ObjectID, nullJSON(e.Before), nullJSON(e.After), e.RequestID, e.ClientIP, e.Note)
	return err
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// AuditLog lists one page of the audit log, newest first.
func (s *Store) AuditLog(ctx context.Context, page xaalis.PageRequest) ([]*xaalis.AuditEntry, int, error) {
	var total int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM audit_log`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count audit log: %w", err)
	}
	tail, args := pageSQL(page)
	list, err := queryAll(ctx, s.pool, "list audit log", func(op string, row interface{ Scan(...any) error }) (*xaalis.AuditEntry, error) {
		var e xaalis.AuditEntry
		var before, after []byte
		if err := row.Scan(&e.ID, &e.At, &e.Actor, &e.TokenID, &e.Action, &e.ObjectType, &e.ObjectID, &before, &after,
			&e.RequestID, &e.ClientIP, &e.Note); err != nil {
			return nil, fmt.Errorf("%s: %w", op, err)
		}
		e.At = e.At.UTC()
		e.Before, e.After = before, after
		return &e, nil
	}, `SELECT id, at, actor, token_id, action, object_type, object_id, before::text, after::text, request_id,
		client_ip, note FROM audit_log ORDER BY at DESC, id DESC`+tail, args...)
	return list, total, err
}

// CountRate adds one to a rate counter's window and returns its count.
func (t *Tx) CountRate(ctx context.Context, scope string, window time.Time) (int, error) {
	var n int
	err := t.tx.QueryRow(ctx, `INSERT INTO rate_counters (scope, window_start, count) VALUES ($1, $2, 1)
		ON CONFLICT (scope, window_start) DO UPDATE SET count = rate_counters.count + 1 RETURNING count`,
		scope, window).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rate: %w", err)
	}
	return n, nil
}
