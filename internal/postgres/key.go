package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

const keyColumns = `k.id, k.merchant_id, k.mode, k.type, k.hash, k.prefix, k.last4, k.scopes, k.allow_ips,
	k.expires_at, k.revoked_at, k.created_at`

func keyDest(k *xaalis.Key, scopes *[]string) []any {
	return []any{&k.ID, &k.MerchantID, &k.Mode, &k.Type, &k.Hash, &k.Prefix, &k.Last4, scopes, &k.AllowIPs,
		&k.ExpiresAt, &k.RevokedAt, &k.CreatedAt}
}

func finishKey(k *xaalis.Key, scopes []string) {
	k.Scopes = nil
	for _, s := range scopes {
		k.Scopes = append(k.Scopes, xaalis.Scope(s))
	}
	k.AllowIPs = nilIfEmpty(k.AllowIPs)
	k.ExpiresAt, k.RevokedAt, k.CreatedAt = utcPtr(k.ExpiresAt), utcPtr(k.RevokedAt), k.CreatedAt.UTC()
}

func getKey(ctx context.Context, q querier, id string, lock string) (*xaalis.Key, error) {
	var k xaalis.Key
	var scopes []string
	err := q.QueryRow(ctx, `SELECT `+keyColumns+` FROM api_keys k WHERE k.id = $1`+lock, id).
		Scan(keyDest(&k, &scopes)...)
	if err != nil {
		return nil, notFound("read key", err)
	}
	finishKey(&k, scopes)
	return &k, nil
}

// Key returns a key by id.
func (s *Store) Key(ctx context.Context, id string) (*xaalis.Key, error) {
	return getKey(ctx, s.pool, id, "")
}

// KeyByHash returns a key and its merchant in one read and, when
// idemKey is not empty, the Idempotency-Key idemKey of the key's merchant,
// mode and key type, or nil when there is none: a LEFT JOIN of the same
// statement, so that a replay costs one round trip.
func (s *Store) KeyByHash(ctx context.Context, hash []byte, idemKey string) (*xaalis.Key, *xaalis.Merchant, *xaalis.IdempotencyRecord, error) {
	var k xaalis.Key
	var scopes []string
	var ir idemRow // left NULL, a record of nil, when not read
	dest := keyDest(&k, &scopes)
	query := `SELECT ` + merchantColumns + `, ` + keyColumns + `
		FROM api_keys k JOIN merchants m ON m.id = k.merchant_id WHERE k.hash = $1`
	args := []any{hash}
	if idemKey != "" {
		dest = append(dest, ir.dest()...)
		query = `SELECT ` + merchantColumns + `, ` + keyColumns + `, ` + idemColumns + `
		FROM api_keys k JOIN merchants m ON m.id = k.merchant_id
		LEFT JOIN idempotency_keys ik ON ik.merchant_id = k.merchant_id AND ik.mode = k.mode
			AND ik.key_type = k.type AND ik.key = $2
		LEFT JOIN server_instances si ON si.id = ik.instance_id
		WHERE k.hash = $1`
		args = append(args, idemKey)
	}
	m, err := scanMerchant("read key by hash", s.reads.mergedRow(ctx, query, args...), dest...)
	if err != nil {
		return nil, nil, nil, err
	}
	finishKey(&k, scopes)
	rec, err := ir.record(s.box, xaalis.IdempotencyScope{MerchantID: k.MerchantID, Mode: k.Mode, KeyType: k.Type, Key: idemKey})
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
	_, err := t.tx.Exec(ctx, `INSERT INTO api_keys (id, merchant_id, mode, type, hash, prefix, last4, scopes,
		allow_ips, expires_at, revoked_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
		k.ID, k.MerchantID, k.Mode, k.Type, k.Hash, k.Prefix, k.Last4, scopes,
		cidrs(k.AllowIPs), k.ExpiresAt, k.RevokedAt, k.CreatedAt)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	return nil
}

// KeyForUpdate reads a key and locks its row until the transaction ends.
func (t *Tx) KeyForUpdate(ctx context.Context, id string) (*xaalis.Key, error) {
	return getKey(ctx, t.tx, id, ` FOR UPDATE`)
}

// RevokeKey marks a key revoked at the given time.
func (t *Tx) RevokeKey(ctx context.Context, id string, at time.Time) error {
	tag, err := t.tx.Exec(ctx, `UPDATE api_keys SET revoked_at = $1 WHERE id = $2`, at, id)
	return oneRow("revoke key", tag, err)
}
