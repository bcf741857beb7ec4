package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const keyColumns = `k.id, k.merchant_id, k.mode, k.type, k.hash, k.prefix, k.last4, k.scopes, k.allow_ips,
	k.expires_at, k.revoked_at, k.created_at`

func keyDest(k *xaalis.Key, scopes, ips *string, exp, rev *sql.NullInt64, created *int64) []any {
	return []any{&k.ID, &k.MerchantID, &k.Mode, &k.Type, &k.Hash, &k.Prefix, &k.Last4, scopes, ips, exp, rev, created}
}

func finishKey(k *xaalis.Key, scopes, ips string, exp, rev sql.NullInt64, created int64) error {
	for _, s := range splitList(scopes) {
		k.Scopes = append(k.Scopes, xaalis.Scope(s))
	}
	var err error
	k.AllowIPs, err = parsePrefixes(ips)
	k.ExpiresAt, k.RevokedAt, k.CreatedAt = fromNullMicros(exp), fromNullMicros(rev), fromMicros(created)
	return err
}

func getKey(ctx context.Context, q querier, id string) (*xaalis.Key, error) {
	var k xaalis.Key
	var scopes, ips string
	var exp, rev sql.NullInt64
	var created int64
	err := q.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys k WHERE k.id = ?`, id).
		Scan(keyDest(&k, &scopes, &ips, &exp, &rev, &created)...)
	if err != nil {
		return nil, notFound(err)
	}
	return &k, finishKey(&k, scopes, ips, exp, rev, created)
}

// Key returns a key by id.
func (s *Store) Key(ctx context.Context, id string) (*xaalis.Key, error) {
	return getKey(ctx, s.read, id)
}

// KeyByHash returns a key and its merchant in one read and, when
// idemKey is not empty, the Idempotency-Key idemKey of the key's merchant,
// mode and key type, or nil when there is none (a LEFT JOIN of the same
// statement).
func (s *Store) KeyByHash(ctx context.Context, hash []byte, idemKey string) (*xaalis.Key, *xaalis.Merchant, *xaalis.IdempotencyRecord, error) {
	var k xaalis.Key
	var scopes, ips string
	var exp, rev sql.NullInt64
	var created int64
	dest := keyDest(&k, &scopes, &ips, &exp, &rev, &created)
	query := `SELECT ` + merchantColumns + `, ` + keyColumns + `
		FROM api_keys k JOIN merchants m ON m.id = k.merchant_id WHERE k.hash = ?`
	args := []any{hash}
	var ir idemRow // left NULL, a record of nil, when not read
	if idemKey != "" {
		dest = append(dest, ir.dest()...)
		query = `SELECT ` + merchantColumns + `, ` + keyColumns + `, ` + idemColumns + `
		FROM api_keys k JOIN merchants m ON m.id = k.merchant_id
		LEFT JOIN idempotency_keys ik ON ik.merchant_id = k.merchant_id AND ik.mode = k.mode
			AND ik.key_type = k.type AND ik.key = ?
		LEFT JOIN server_instances si ON si.id = ik.instance_id
		WHERE k.hash = ?`
		args = []any{idemKey, hash}
	}
	m, err := scanMerchant(s.point.QueryRowContext(ctx, query, args...).Scan, dest...)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := finishKey(&k, scopes, ips, exp, rev, created); err != nil {
		return nil, nil, nil, err
	}
	rec, err := ir.record(s.secretBox(), xaalis.IdempotencyScope{MerchantID: k.MerchantID, Mode: k.Mode, KeyType: k.Type, Key: idemKey})
	if err != nil {
		return nil, nil, nil, err
	}
	return &k, m, rec, nil
}

// CreateKey inserts a key.
func (t *Tx) CreateKey(ctx context.Context, k *xaalis.Key) error {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	_, err := t.tx.ExecContext(ctx, `INSERT INTO api_keys (id, merchant_id, mode, type, hash, prefix, last4, scopes,
		allow_ips, expires_at, revoked_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.MerchantID, k.Mode, k.Type, k.Hash, k.Prefix, k.Last4, strings.Join(scopes, ","),
		joinPrefixes(k.AllowIPs), nullMicros(k.ExpiresAt), nullMicros(k.RevokedAt), micros(k.CreatedAt))
	return err
}

// KeyForUpdate reads a key inside the write transaction.
func (t *Tx) KeyForUpdate(ctx context.Context, id string) (*xaalis.Key, error) {
	return getKey(ctx, t.tx, id)
}

// RevokeKey marks a key revoked at the given time.
func (t *Tx) RevokeKey(ctx context.Context, id string, at time.Time) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ?`, micros(at), id)
	if err != nil {
		return err
	}
	return oneRow(res)
}
