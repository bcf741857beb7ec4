package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const operatorTokenColumns = `id, name, hash, created_at, expires_at, revoked_at`

func scanOperatorToken(sc func(...any) error) (*xaalis.OperatorToken, error) {
	var o xaalis.OperatorToken
	var created int64
	var expires, revoked sql.NullInt64
	if err := sc(&o.ID, &o.Name, &o.Hash, &created, &expires, &revoked); err != nil {
		return nil, notFound(err)
	}
	o.CreatedAt, o.ExpiresAt, o.RevokedAt = fromMicros(created), fromNullMicros(expires), fromNullMicros(revoked)
	return &o, nil
}

// InsertOperatorToken stores an operator token.
func (t *Tx) InsertOperatorToken(ctx context.Context, o *xaalis.OperatorToken) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO operator_tokens (`+operatorTokenColumns+`) VALUES (?, ?, ?, ?, ?, ?)`,
		o.ID, o.Name, o.Hash, micros(o.CreatedAt), nullMicros(o.ExpiresAt), nullMicros(o.RevokedAt))
	if err != nil {
		return fmt.Errorf("insert operator token: %w", err)
	}
	return nil
}

// OperatorTokenByHash finds an operator token by its hash.
func (s *Store) OperatorTokenByHash(ctx context.Context, hash []byte) (*xaalis.OperatorToken, error) {
	o, err := scanOperatorToken(s.read.QueryRowContext(ctx, `SELECT `+operatorTokenColumns+` FROM operator_tokens
		WHERE hash = ?`, hash).Scan)
	if err != nil && err != xaalis.ErrNotFound {
		return nil, fmt.Errorf("read operator token: %w", err)
	}
	return o, err
}

// OperatorTokens lists every operator token, newest first.
func (s *Store) OperatorTokens(ctx context.Context) ([]*xaalis.OperatorToken, error) {
	return queryAll(ctx, s.read, "list operator tokens", scanOperatorToken,
		`SELECT `+operatorTokenColumns+` FROM operator_tokens ORDER BY created_at DESC, id DESC`)
}

// OperatorTokenForUpdate reads a token inside the write transaction.
func (t *Tx) OperatorTokenForUpdate(ctx context.Context, id string) (*xaalis.OperatorToken, error) {
	return scanOperatorToken(t.tx.QueryRowContext(ctx, `SELECT `+operatorTokenColumns+` FROM operator_tokens
		WHERE id = ?`, id).Scan)
}

// RevokeOperatorToken marks a token revoked.
func (t *Tx) RevokeOperatorToken(ctx context.Context, id string, at time.Time) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE operator_tokens SET revoked_at = ? WHERE id = ?`, micros(at), id)
	if err != nil {
		return err
	}
	return oneRow(res)
}

// InsertAudit appends to the audit log.
func (t *Tx) InsertAudit(ctx context.Context, e *xaalis.AuditEntry) error {
	_, err := t.tx.ExecContext(ctx, `INSERT INTO audit_log (id, at, actor, token_id, action, object_type, object_id,
		before, after, request_id, client_ip, note) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, e.ID, micros(e.At), e.Actor,
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
	if err := s.read.QueryRowContext(ctx, `SELECT count(*) FROM audit_log`).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count audit log: %w", err)
	}
	list, err := queryAll(ctx, s.read, "list audit log", func(sc func(...any) error) (*xaalis.AuditEntry, error) {
		var e xaalis.AuditEntry
		var at int64
		var before, after sql.NullString
		if err := sc(&e.ID, &at, &e.Actor, &e.TokenID, &e.Action, &e.ObjectType, &e.ObjectID, &before, &after,
			&e.RequestID, &e.ClientIP, &e.Note); err != nil {
			return nil, err
		}
		e.At = fromMicros(at)
		if before.Valid {
			e.Before = json.RawMessage(before.String)
		}
		if after.Valid {
			e.After = json.RawMessage(after.String)
		}
		return &e, nil
	}, `SELECT id, at, actor, token_id, action, object_type, object_id, before, after, request_id, client_ip, note FROM audit_log
		ORDER BY at DESC, id DESC LIMIT +? OFFSET ?`, page.PerPage, page.Offset())
	return list, total, err
}

// CountRate adds one to a rate counter's window and returns its count.
func (t *Tx) CountRate(ctx context.Context, scope string, window time.Time) (int, error) {
	var n int
	err := t.tx.QueryRowContext(ctx, `INSERT INTO rate_counters (scope, window_start, count) VALUES (?, ?, 1)
		ON CONFLICT (scope, window_start) DO UPDATE SET count = count + 1 RETURNING count`,
		scope, micros(window)).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count rate: %w", err)
	}
	return n, nil
}
