package xaalis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// OperatorToken authenticates the service operator on the admin listener.
type OperatorToken struct {
	ID        string
	Name      string
	Hash      []byte
	CreatedAt time.Time
	// ExpiresAt, when set, ends the token on its own.
	ExpiresAt *time.Time
	RevokedAt *time.Time
}

// Usable reports whether the token is neither revoked nor expired at now.
func (t *OperatorToken) Usable(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// MarshalJSON renders a token without its hash.
func (t *OperatorToken) MarshalJSON() ([]byte, error) {
	ts := func(p *time.Time) *string {
		if p == nil {
			return nil
		}
		s := Timestamp(*p)
		return &s
	}
	return json.Marshal(struct {
		ID        string  `json:"id"`
		Object    string  `json:"object"`
		Name      string  `json:"name"`
		CreatedAt string  `json:"created_at"`
		ExpiresAt *string `json:"expires_at"`
		RevokedAt *string `json:"revoked_at"`
	}{t.ID, "operator_token", t.Name, Timestamp(t.CreatedAt), ts(t.ExpiresAt), ts(t.RevokedAt)})
}

// operatorTokenPrefix starts every operator token.
const operatorTokenPrefix = "xop_"

// CreateOperatorToken makes a token for the admin API, valid until
// expiresAt when it is given; the token is shown once and only its hash is
// stored. It returns validation_error for a missing name or a past expiry.
func (a *App) CreateOperatorToken(ctx context.Context, name string, expiresAt *time.Time) (*OperatorToken, string, error) {
	name = strings.TrimSpace(name)
	v := ValidationErrors{}
	if name == "" || utf8.RuneCountInString(name) > 100 {
		v.Add("name", "is required, at most 100 characters")
	}
	checkText(v, "name", name, false)
	now := a.now()
	if expiresAt != nil && !expiresAt.After(now) {
		v.Add("expires_at", "must be in the future")
	}
	if err := v.Err(); err != nil {
		return nil, "", err
	}
	secret := operatorTokenPrefix + RandomString(40, keyAlphabet)
	pepper, err := a.keyPepper(ctx)
	if err != nil {
		return nil, "", err
	}
	t := &OperatorToken{ID: a.NewID(), Name: name, Hash: HashKey(pepper, secret), CreatedAt: now, ExpiresAt: expiresAt}
	err = a.update(ctx, func(tx Tx) error {
		if err := tx.InsertOperatorToken(ctx, t); err != nil {
			return err
		}
		return a.audit(ctx, tx, "operator_token.create", "operator_token", t.ID, nil, t)
	})
	if err != nil {
		return nil, "", err
	}
	return t, secret, nil
}

// OperatorTokens lists every operator token, newest first, without hashes.
func (a *App) OperatorTokens(ctx context.Context) ([]*OperatorToken, error) {
	return a.Store.OperatorTokens(ctx)
}

// RevokeOperatorToken ends a token at once; revoking a revoked token
// changes nothing. It returns not_found.
func (a *App) RevokeOperatorToken(ctx context.Context, id string) (*OperatorToken, error) {
	var out *OperatorToken
	err := a.update(ctx, func(tx Tx) error {
		t, err := tx.OperatorTokenForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if t.RevokedAt == nil {
			before := *t
			now := a.now()
			t.RevokedAt = &now
			if err := tx.RevokeOperatorToken(ctx, id, now); err != nil {
				return fmt.Errorf("revoke operator token: %w", err)
			}
			if err := a.audit(ctx, tx, "operator_token.revoke", "operator_token", t.ID, &before, t); err != nil {
				return err
			}
		}
		out = t
		return nil
	})
	return out, err
}

// AuthenticateOperator checks an operator token: unauthorized when it is
// unknown, revoked or expired.
func (a *App) AuthenticateOperator(ctx context.Context, secret string) (*OperatorToken, error) {
	if !strings.HasPrefix(secret, operatorTokenPrefix) {
		return nil, E(EUnauthorized)
	}
	pepper, err := a.keyPepper(ctx)
	if err != nil {
		return nil, err
	}
	t, err := a.Store.OperatorTokenByHash(ctx, HashKey(pepper, secret))
	if errors.Is(err, ErrNotFound) || (err == nil && !t.Usable(a.now())) {
		return nil, E(EUnauthorized)
	}
	return t, err
}

// Actor is who performs an operator action: a token on the admin listener,
// or the command line on the database's host.
type Actor struct {
	// Name is the token's name, or "cli:<user>" for the command line.
	Name string
	// TokenID is the operator token used; "" for the command line.
	TokenID   string
	RequestID string
	// ClientIP is the operator's client address (behind a trusted proxy,
	// the one it forwarded); "" for the command line.
	ClientIP string
}

type actorKey struct{}

// WithActor returns ctx carrying the operator behind the actions run with it.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the operator ctx carries; an action without one is
// recorded as the command line's.
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return Actor{Name: "cli"}
}

// AuditEntry is one operator action, kept in an append-only table: who,
// with which token, what, on what, when, and the record before and after.
type AuditEntry struct {
	ID         string
	At         time.Time
	Actor      string
	TokenID    string
	Action     string
	ObjectType string
	ObjectID   string
	Before     json.RawMessage // null for a creation
	After      json.RawMessage
	RequestID  string
	// ClientIP is the address the action came from; "" for the command line.
	ClientIP string
	// Note is what the operator wrote with the action ("" for none): a
	// payment marked refunded names the payout that paid the payer back,
	// a decision or a move its reason.
	Note string
}

// MarshalJSON renders the public audit record.
func (e *AuditEntry) MarshalJSON() ([]byte, error) {
	raw := func(b json.RawMessage) json.RawMessage {
		if len(b) == 0 {
			return json.RawMessage("null")
		}
		return b
	}
	return json.Marshal(struct {
		ID         string          `json:"id"`
		Object     string          `json:"object"`
		At         string          `json:"at"`
		Actor      string          `json:"actor"`
		TokenID    *string         `json:"operator_token_id"`
		Action     string          `json:"action"`
		ObjectType string          `json:"object_type"`
		ObjectID   string          `json:"object_id"`
		Before     json.RawMessage `json:"before"`
		After      json.RawMessage `json:"after"`
		RequestID  *string         `json:"request_id"`
		ClientIP   *string         `json:"client_ip"`
		Note       *string         `json:"note"`
	}{e.ID, "audit_entry", Timestamp(e.At), e.Actor, strPtr(e.TokenID), e.Action, e.ObjectType, e.ObjectID,
		raw(e.Before), raw(e.After), strPtr(e.RequestID), strPtr(e.ClientIP), strPtr(e.Note)})
}

// audit records an operator action inside the action's own transaction,
// so the log and the change commit together.
func (a *App) audit(ctx context.Context, tx Tx, action, objType, objID string, before, after any) error {
	return a.auditNote(ctx, tx, action, objType, objID, before, after, "")
}

// auditNote is audit with the operator's note kept beside the change.
func (a *App) auditNote(ctx context.Context, tx Tx, action, objType, objID string, before, after any, note string) error {
	enc := func(v any) (json.RawMessage, error) {
		if v == nil {
			return nil, nil
		}
		return json.Marshal(v)
	}
	b, err := enc(before)
	if err != nil {
		return fmt.Errorf("audit before: %w", err)
	}
	af, err := enc(after)
	if err != nil {
		return fmt.Errorf("audit after: %w", err)
	}
	act := ActorFrom(ctx)
	e := &AuditEntry{ID: a.NewID(), At: a.now(), Actor: act.Name, TokenID: act.TokenID, Action: action,
		ObjectType: objType, ObjectID: objID, Before: b, After: af, RequestID: act.RequestID, ClientIP: act.ClientIP,
		Note: note}
	if err := tx.InsertAudit(ctx, e); err != nil {
		return fmt.Errorf("insert audit entry: %w", err)
	}
	return nil
}

// AuditLog lists operator actions, newest first.
func (a *App) AuditLog(ctx context.Context, page PageRequest) ([]*AuditEntry, Pagination, error) {
	list, total, err := a.Store.AuditLog(ctx, page)
	if err != nil {
		return nil, Pagination{}, fmt.Errorf("list audit log: %w", err)
	}
	return list, NewPagination(page, total), nil
}
