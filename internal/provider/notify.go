package provider

import (
	"bytes"
	"context"
	"crypto/hmac"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// VerifyNotification checks an inbound provider notification's signature
// (X-Provider-Signature, any route's notify_secret, timestamp within 300 s
// of now) and parses it. A provider unknown, disabled, or disabled for or
// not serving the notification's country is provider_unavailable_webhook;
// a missing or wrong signature or a stale timestamp is invalid_signature;
// a signed body that is not a notification is invalid_request.
//
// A payout.updated notification gives the payout's provider id as
// Notification.ProviderRef (the PayoutResult.ProviderRef Payout returned),
// its state and reason; EventID stays the provider's event id.
func (g *Gateway) VerifyNotification(ctx context.Context, provider string, r *http.Request, body []byte) (xaalis.Notification, error) {
	p, ok := g.spec(provider)
	if !ok || !p.Enabled {
		return xaalis.Notification{}, xaalis.E(xaalis.EProviderUnavailableWebhook, "provider", provider)
	}
	var header string
	if r != nil {
		header = r.Header.Get(SignatureHeader)
	}
	if err := verifySignature(p, header, body, g.now().Unix()); err != nil {
		return xaalis.Notification{}, err
	}
	ev, err := parseEvent(body)
	if err != nil {
		return xaalis.Notification{}, err
	}
	country := ev.Country
	if country == "" && r != nil {
		if country = r.PathValue("country"); country == "" {
			country = r.URL.Query().Get("country")
		}
	}
	c := xaalis.Country(country)
	if country != "" && (!c.Valid() || !p.Serves(c)) {
		e := xaalis.E(xaalis.EProviderUnavailableWebhook, "provider", provider)
		e.Message = "The provider " + provider + " is disabled for country " + country + "."
		return xaalis.Notification{}, e
	}
	n := xaalis.Notification{EventID: ev.EventID, Provider: provider, Country: c}
	if po := ev.Payout; ev.Type == EventPayoutUpdated {
		// A payout's notification names the payout by the provider's id,
		// as Payout answered it (PayoutResult.ProviderRef).
		n.ProviderRef, n.Reason = po.ID, po.Reason
		n.State, _ = state(po.Status)
		return n, nil
	}
	n.ProviderRef, n.Reference, n.Reason = ev.Collection.ID, ev.Collection.Reference, ev.Collection.Reason
	n.State, _ = state(ev.Collection.Status)
	if d := ev.Dispute; ev.Type == EventDisputeOpened && d != nil {
		cur := xaalis.Currency(d.Currency)
		if cur == "" {
			cur = xaalis.XOF
		}
		n.Dispute = &xaalis.DisputeNotice{Amount: xaalis.Amount{Minor: d.Amount, Currency: cur}, Reason: d.Reason}
	}
	return n, nil
}

func invalidSignature(msg string) *xaalis.Error {
	e := xaalis.E(xaalis.EInvalidSignature)
	e.Message = msg
	return e
}

// verifySignature checks header against body with every notify_secret of
// the provider's routes, in constant time.
func verifySignature(p xaalis.ProviderSpec, header string, body []byte, now int64) error {
	if header == "" {
		return invalidSignature("The " + SignatureHeader + " header is missing.")
	}
	sig, ok := parseSignature(header)
	if !ok {
		return invalidSignature("The " + SignatureHeader + " header is malformed.")
	}
	skew := now - sig.t
	if skew < 0 {
		skew = -skew
	}
	if skew > int64(SignatureTolerance.Seconds()) {
		return invalidSignature("The notification's timestamp is too far from now.")
	}
	var secrets []string
	for _, rt := range p.Routes {
		if rt.NotifySecret != "" && !slices.Contains(secrets, rt.NotifySecret) {
			secrets = append(secrets, rt.NotifySecret)
		}
	}
	match := 0
	for _, s := range secrets {
		want := mac(s, sig.ts, body)
		for _, v := range sig.v1s {
			// Every comparison runs, so timing says nothing of which matched.
			if hmac.Equal(want, v) {
				match = 1
			}
		}
	}
	if match == 0 {
		return invalidSignature("The notification's signature does not match.")
	}
	return nil
}

// parseEvent parses and checks a notification body.
func parseEvent(body []byte) (Event, error) {
	bad := func(msg string) (Event, error) {
		return Event{}, xaalis.Errorf(xaalis.EInvalidRequest, "The provider notification is invalid: %s.", msg)
	}
	var ev Event
	if k := xaalis.DuplicateKey(body, &ev); k != "" {
		return bad("the key " + strconv.Quote(k) + " appears more than once")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ev); err != nil {
		return bad("not a JSON object")
	}
	if dec.More() {
		return bad("trailing data after the JSON object")
	}
	if ev.EventID == "" || len(ev.EventID) > 255 {
		return bad("event_id is missing or too long")
	}
	if ev.Type == EventPayoutUpdated {
		po := ev.Payout
		switch {
		case po == nil:
			return bad("payout is missing")
		case po.ID == "" || len(po.ID) > 255:
			return bad("payout.id is missing or too long")
		case len(po.Reference) > 255 || len(po.Reason) > 255:
			return bad("payout.reference or payout.reason is too long")
		}
		if _, ok := state(po.Status); !ok {
			return bad("payout.status must be pending, success, failed or cancelled")
		}
		return ev, nil
	}
	if ev.Collection.ID == "" || len(ev.Collection.ID) > 255 {
		return bad("collection.id is missing or too long")
	}
	if len(ev.Collection.Reference) > 255 {
		return bad("collection.reference is too long")
	}
	if _, ok := state(ev.Collection.Status); !ok {
		return bad("collection.status must be pending, success, failed or cancelled")
	}
	switch ev.Type {
	case EventCollectionUpdated:
	case EventDisputeOpened:
		d := ev.Dispute
		if d == nil || d.Amount <= 0 {
			return bad("dispute.amount must be a positive integer")
		}
		if d.Currency != "" && !xaalis.Currency(d.Currency).Valid() {
			return bad("dispute.currency is unknown")
		}
	default:
		return bad("type must be " + EventCollectionUpdated + ", " + EventDisputeOpened + " or " + EventPayoutUpdated)
	}
	return ev, nil
}
