package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func asXaalis(err error, e **xaalis.Error) bool { return errors.As(err, e) }

func cmdMigrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", stderr)
	db := databaseFlag(fs, getenv)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	// Opening the store applies the migrations.
	return withApp(ctx, *db, getenv, func(*xaalis.App) error {
		fmt.Fprintln(stdout, "migrations applied")
		return nil
	})
}

func cmdMerchantCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("merchant create", stderr)
	db := databaseFlag(fs, getenv)
	name := fs.String("name", "", "merchant name (required)")
	country := fs.String("country", "SN", "country: SN, CI, ML, BF, TG, BJ, NE or GW")
	currency := fs.String("settlement-currency", "XOF", "settlement currency")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *name == "" {
		return usagef("merchant create: --name is required")
	}
	return withApp(ctx, *db, getenv, func(app *xaalis.App) error {
		m, keys, err := app.CreateMerchant(ctx, xaalis.MerchantCreate{
			Name: *name, Country: xaalis.Country(*country), SettlementCurrency: xaalis.Currency(*currency),
		})
		if err != nil {
			return describe(err, "name", "country", "settlement_currency")
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(struct {
				MerchantID string              `json:"merchant_id"`
				Keys       xaalis.MerchantKeys `json:"keys"`
			}{m.ID, keys})
		}
		fmt.Fprintf(stdout, "merchant %s (%s) created; these keys are shown once:\n", m.ID, m.Name)
		fmt.Fprintf(stdout, "  secret test key:      %s\n  publishable test key: %s\n  secret live key:      %s\n  publishable live key: %s\n",
			keys.SecretTest, keys.PublishableTest, keys.SecretLive, keys.PublishableLive)
		return nil
	})
}

func cmdMerchantUpdate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("merchant update", stderr)
	db := databaseFlag(fs, getenv)
	status := fs.String("status", "", "active, suspended, pending or closed")
	kyc := fs.String("kyc", "", "pending, approved or rejected")
	providers := fs.String("allowed-providers", "", "provider whitelist, comma-separated (empty: all providers)")
	ips := fs.String("allow-ips", "", "IP allowlist of the account, CIDRs comma-separated (empty: any address)")
	returnHosts := fs.String("return-hosts", "", "hosts the return URLs of payments made with publishable keys may point at, comma-separated (shop.example,pay.shop.example; empty: none)")
	name := fs.String("name", "", "new name")
	payouts := fs.String("payouts", "", "enabled or disabled: whether the account may make payouts")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) != 1 {
		return usagef("merchant update: expected one merchant ID")
	}
	set := setFlags(fs)
	var c xaalis.MerchantChange
	if set["status"] {
		c.Status = status
	}
	if set["kyc"] {
		c.KYC = kyc
	}
	if set["allowed-providers"] {
		p := splitComma(*providers)
		c.AllowedProviders = &p
	}
	if set["allow-ips"] {
		p := splitComma(*ips)
		c.AllowIPs = &p
	}
	if set["return-hosts"] {
		h := splitComma(*returnHosts)
		c.ReturnHosts = &h
	}
	if set["name"] {
		c.Name = name
	}
	if set["payouts"] {
		on := *payouts == "enabled"
		if !on && *payouts != "disabled" {
			return usagef("--payouts: expected enabled or disabled")
		}
		c.PayoutsEnabled = &on
	}
	u, err := c.Update()
	if err != nil {
		return describe(err, "allow_ips", "return_hosts")
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		m, err := app.UpdateMerchant(ctx, pos[0], u)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("merchant %s not found", pos[0])
		} else if err != nil {
			return describe(err, "name", "status", "kyc", "allowed_providers")
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(xaalis.MerchantJSON(m))
		}
		fmt.Fprintf(stdout, "merchant %s updated: status %s, kyc %s\n", m.ID, m.Status, m.KYC)
		return nil
	})
}

// keyJSON is how the CLI shows a key; secret is set only at creation.
func keyJSON(k *xaalis.Key, secret string) map[string]any {
	scopes := make([]string, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = string(s)
	}
	ips := make([]string, len(k.AllowIPs))
	for i, p := range k.AllowIPs {
		ips[i] = p.String()
	}
	out := map[string]any{
		"id": k.ID, "object": "api_key", "merchant_id": k.MerchantID, "mode": k.Mode, "type": k.Type,
		"livemode": k.Mode.Live(), "scopes": scopes, "allow_ips": ips, "prefix": k.Prefix, "last4": k.Last4,
		"created_at": xaalis.Timestamp(k.CreatedAt), "expires_at": nil, "revoked_at": nil,
	}
	if secret != "" {
		out["key"] = secret
	}
	if k.ExpiresAt != nil {
		out["expires_at"] = xaalis.Timestamp(*k.ExpiresAt)
	}
	if k.RevokedAt != nil {
		out["revoked_at"] = xaalis.Timestamp(*k.RevokedAt)
	}
	return out
}

func cmdKeyCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key create", stderr)
	db := databaseFlag(fs, getenv)
	merchant := fs.String("merchant", "", "merchant ID (required)")
	mode := fs.String("mode", "", "test or live (required)")
	typ := fs.String("type", "secret", "secret or publishable")
	scopes := fs.String("scopes", "", "comma-separated scopes (default all: can_read_transactions,can_initiate_payment,can_payout)")
	ips := fs.String("allow-ips", "", "IP allowlist, CIDRs comma-separated")
	expires := fs.String("expires-at", "", "expiry time, RFC 3339")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *merchant == "" || *mode == "" {
		return usagef("key create: --merchant and --mode are required")
	}
	in := xaalis.KeyCreate{MerchantID: *merchant, Mode: xaalis.Mode(*mode), Type: xaalis.KeyType(*typ)}
	if setFlags(fs)["scopes"] {
		if in.Type == xaalis.KeyPublishable {
			// A publishable key's rights are fixed (create payments, read
			// their status): scopes would be dropped without a word.
			return usagef("key create: --scopes is for secret keys; a publishable key only creates payments and reads their status")
		}
		in.Scopes = []xaalis.Scope{}
		for _, s := range splitComma(*scopes) {
			in.Scopes = append(in.Scopes, xaalis.Scope(s))
		}
		if len(in.Scopes) == 0 {
			// A key without a scope is refused by every route: leaving
			// the flag out gives all three.
			return usagef("key create: --scopes names no scope; name at least one, or leave it out for all three")
		}
	}
	var err error
	if in.AllowIPs, err = xaalis.ParsePrefixes(splitComma(*ips)); err != nil {
		return usagef("--allow-ips: %v", err)
	}
	if *expires != "" {
		t, err := time.Parse(time.RFC3339, *expires)
		if err != nil {
			return usagef("--expires-at: expected RFC 3339, such as 2027-01-31T00:00:00Z")
		}
		t = t.UTC()
		in.ExpiresAt = &t
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		k, secret, err := app.CreateKey(ctx, in)
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("merchant %s not found", *merchant)
		} else if err != nil {
			return describe(err, "mode", "type", "scopes", "expires_at")
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(keyJSON(k, secret))
		}
		fmt.Fprintf(stdout, "key %s created; it is shown once:\n  %s\n", k.ID, secret)
		return nil
	})
}

func cmdKeyRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := newFlags("key revoke", stderr)
	db := databaseFlag(fs, getenv)
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return parseError(err)
	}
	if len(pos) != 1 {
		return usagef("key revoke: expected one key ID")
	}
	return withExistingApp(ctx, *db, getenv, func(app *xaalis.App) error {
		k, err := app.RevokeKey(ctx, pos[0])
		if errors.Is(err, xaalis.ErrNotFound) {
			return fmt.Errorf("key %s not found", pos[0])
		} else if err != nil {
			return err
		}
		if *asJSON {
			return json.NewEncoder(stdout).Encode(keyJSON(k, ""))
		}
		fmt.Fprintf(stdout, "key %s revoked\n", k.ID)
		return nil
	})
}
