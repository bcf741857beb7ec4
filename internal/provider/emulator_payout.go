package provider

import (
	"net/http"
	"slices"
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Payouts and refunds in the emulator: shared by every route of a
// provider, idempotent on the Idempotency-Key (and the reference).

// eventObject is the id of what an Event is about, for logs.
func eventObject(ev Event) string {
	if ev.Payout != nil {
		return ev.Payout.ID
	}
	return ev.Collection.ID
}

// payoutPrefix and refundPrefix start the emulator's payout and refund
// ids: po_a_..., rf_a_... (collections are col_a_...).
func (p *emuProvider) payoutPrefix() string {
	return "po_" + strings.TrimPrefix(p.name, "channel_") + "_"
}

func (p *emuProvider) refundPrefix() string {
	return "rf_" + strings.TrimPrefix(p.name, "channel_") + "_"
}

func (o *EmulatedPayout) answer() Payout {
	return Payout{ID: o.ID, Reference: o.Reference, Status: string(o.Status), Reason: o.Reason}
}

func (f *EmulatedRefund) answer() Refund {
	return Refund{ID: f.ID, Reference: f.Reference, Status: string(f.Status), Reason: f.Reason}
}

// Payout returns a copy of the oldest payout the emulator holds with
// this reference, of any provider.
func (e *Emulator) Payout(reference string) (EmulatedPayout, bool) {
	for _, o := range e.Payouts() {
		if o.Reference == reference {
			return o, true
		}
	}
	return EmulatedPayout{}, false
}

// Payouts returns copies of every payout, oldest first.
func (e *Emulator) Payouts() []EmulatedPayout {
	e.mu.Lock()
	out := make([]EmulatedPayout, 0, len(e.payouts))
	for _, o := range e.payouts {
		out = append(out, *o)
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b EmulatedPayout) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// Refunds returns copies of every refund, oldest first.
func (e *Emulator) Refunds() []EmulatedRefund {
	e.mu.Lock()
	out := make([]EmulatedRefund, 0, len(e.refunds))
	for _, f := range e.refunds {
		out = append(out, *f)
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b EmulatedRefund) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// SettlePayout settles a pending payout (one held by the hold_payouts
// switch): its status becomes outcome (success, failed or cancelled;
// reason defaults to recipient_wallet_rejected or payout_cancelled) and a
// signed payout.updated notification is sent to its notify_url (unless
// the provider loses its callbacks) before SettlePayout returns. A payout
// to a number ending 0004 never settles.
func (e *Emulator) SettlePayout(id string, outcome xaalis.ProviderState, reason string) (Delivery, error) {
	switch outcome {
	case xaalis.ProviderSuccess:
		reason = ""
	case xaalis.ProviderFailed:
		if reason == "" {
			reason = ReasonRecipientRejected
		}
	case xaalis.ProviderCancelled:
		if reason == "" {
			reason = ReasonPayoutCancelled
		}
	default:
		return Delivery{}, emuErr(http.StatusBadRequest, "invalid_request", "outcome must be success, failed or cancelled")
	}
	e.mu.Lock()
	o, ok := e.payouts[id]
	var err error
	switch {
	case !ok:
		err = emuErr(http.StatusNotFound, CodeNotFound, "no payout %q", id)
	case o.Status != xaalis.ProviderPending:
		err = emuErr(http.StatusConflict, "not_pending", "the payout is already %s", o.Status)
	case MagicOf(o.Phone) == MagicNoPayer:
		err = emuErr(http.StatusConflict, "no_recipient", "the payout never settles (number ending %s)", MagicNoPayer)
	}
	if err != nil {
		e.mu.Unlock()
		return Delivery{}, err
	}
	o.Status, o.Reason = outcome, reason
	p := e.providers[o.Provider]
	ev := Event{
		EventID: randomID("evt_"),
		Type:    EventPayoutUpdated,
		Country: o.Country,
		Payout:  &EventPayout{ID: o.ID, Reference: o.Reference, Status: string(o.Status), Reason: o.Reason},
	}
	url, lose, secret := o.NotifyURL, p.switches.LoseCallbacks, p.secret
	e.mu.Unlock()
	return e.send(url, secret, ev, lose), nil
}

func (e *Emulator) createPayout(p *emuProvider, route string, r *http.Request) (int, any) {
	if !p.spec.Payouts {
		return errorBody(emuErr(http.StatusUnprocessableEntity, CodePayoutUnsupported, "%s makes no payouts", p.name))
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return errorBody(emuErr(http.StatusBadRequest, "idempotency_key_required", "the Idempotency-Key header is required"))
	}
	var in PayoutRequest
	if err := decodeBody(r, &in); err != nil {
		return errorBody(err)
	}
	switch {
	case in.Reference == "":
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_reference", "reference is required"))
	case in.Amount <= 0:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_amount", "amount must be a positive integer of minor units"))
	case !xaalis.Currency(in.Currency).Valid():
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_currency", "unknown currency %q", in.Currency))
	case in.Phone == "":
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_phone", "phone is required"))
	case !p.spec.Serves(xaalis.Country(in.Country)):
		return errorBody(emuErr(http.StatusUnprocessableEntity, "country_not_served", "%s does not serve %q", p.name, in.Country))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := p.payoutByKey[key]
	if !ok {
		id, ok = p.payoutByRef[in.Reference]
	}
	if ok {
		o := e.payouts[id]
		if o.Reference != in.Reference || o.Amount != in.Amount || o.Currency != in.Currency || o.Phone != in.Phone {
			return errorBody(emuErr(http.StatusConflict, "idempotency_conflict", "the Idempotency-Key or reference was used with another payout"))
		}
		o.Requests++
		return http.StatusCreated, o.answer()
	}
	// Refused and unreachable payouts are not recorded: no money moved.
	magic := MagicOf(in.Phone)
	switch magic {
	case MagicRefused:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "recipient_refused", "the recipient's wallet cannot receive money (number ending %s)", magic))
	case MagicUnreachable:
		return errorBody(emuErr(http.StatusServiceUnavailable, "unavailable", "the provider is unreachable (number ending %s)", magic))
	}
	o := &EmulatedPayout{
		ID:             randomID(p.payoutPrefix()),
		Provider:       p.name,
		Route:          route,
		IdempotencyKey: key,
		Reference:      in.Reference,
		Amount:         in.Amount,
		Currency:       in.Currency,
		Phone:          in.Phone,
		Country:        in.Country,
		RecipientName:  in.RecipientName,
		NotifyURL:      in.NotifyURL,
		Requests:       1,
		Created:        e.opts.Now(),
	}
	o.Status, o.Reason = payoutOutcome(magic)
	if o.Status == xaalis.ProviderSuccess && p.switches.HoldPayouts {
		o.Status = xaalis.ProviderPending
	}
	e.payouts[o.ID] = o
	p.payoutByKey[key] = o.ID
	p.payoutByRef[o.Reference] = o.ID
	return http.StatusCreated, o.answer()
}

func (e *Emulator) getPayout(p *emuProvider, _ string, r *http.Request) (int, any) {
	if !p.spec.Payouts {
		return errorBody(emuErr(http.StatusUnprocessableEntity, CodePayoutUnsupported, "%s makes no payouts", p.name))
	}
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		return errorBody(emuErr(http.StatusBadRequest, "invalid_request", "the reference query parameter is required"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := p.payoutByRef[ref]
	if !ok {
		return errorBody(emuErr(http.StatusNotFound, CodeNotFound, "no payout with reference %q", ref))
	}
	return http.StatusOK, e.payouts[id].answer()
}

// getRefund answers GET {base}/refunds?reference=: the refund, on any
// route (refunds are shared, as payouts), or 404 not_found.
func (e *Emulator) getRefund(p *emuProvider, _ string, r *http.Request) (int, any) {
	if !p.spec.Refunds {
		return errorBody(emuErr(http.StatusUnprocessableEntity, CodeRefundUnsupported, "%s makes no automatic refunds", p.name))
	}
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		return errorBody(emuErr(http.StatusBadRequest, "invalid_request", "the reference query parameter is required"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := p.refundByRef[ref]
	if !ok {
		return errorBody(emuErr(http.StatusNotFound, CodeNotFound, "no refund with reference %q", ref))
	}
	return http.StatusOK, e.refunds[id].answer()
}

func (e *Emulator) createRefund(p *emuProvider, route string, r *http.Request) (int, any) {
	if !p.spec.Refunds {
		return errorBody(emuErr(http.StatusUnprocessableEntity, CodeRefundUnsupported, "%s makes no automatic refunds", p.name))
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return errorBody(emuErr(http.StatusBadRequest, "idempotency_key_required", "the Idempotency-Key header is required"))
	}
	var in RefundRequest
	if err := decodeBody(r, &in); err != nil {
		return errorBody(err)
	}
	switch {
	case in.Reference == "":
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_reference", "reference is required"))
	case in.Amount <= 0:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_amount", "amount must be a positive integer of minor units"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := p.refundByKey[key]
	if !ok {
		id, ok = p.refundByRef[in.Reference]
	}
	if ok {
		f := e.refunds[id]
		if f.Reference != in.Reference || f.CollectionID != in.CollectionID || f.Amount != in.Amount || f.Currency != in.Currency {
			return errorBody(emuErr(http.StatusConflict, "idempotency_conflict", "the Idempotency-Key or reference was used with another refund"))
		}
		f.Requests++
		return http.StatusCreated, f.answer()
	}
	c, ok := e.collections[in.CollectionID]
	switch {
	case !ok || c.Provider != p.name:
		return errorBody(emuErr(http.StatusNotFound, "collection_not_found", "no collection %q", in.CollectionID))
	case c.Status != xaalis.ProviderSuccess:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "collection_not_refundable", "the collection is %s", c.Status))
	case in.Currency != c.Currency:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_currency", "the collection is in %s", c.Currency))
	case c.Refunded+in.Amount > c.Amount:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "refund_exceeds_collected",
			"%d minor units refunded of %d: %d more is too much", c.Refunded, c.Amount, in.Amount))
	}
	c.Refunded += in.Amount
	f := &EmulatedRefund{
		ID:             randomID(p.refundPrefix()),
		Provider:       p.name,
		Route:          route,
		IdempotencyKey: key,
		Reference:      in.Reference,
		CollectionID:   c.ID,
		Amount:         in.Amount,
		Currency:       in.Currency,
		Status:         xaalis.ProviderSuccess,
		Requests:       1,
		Created:        e.opts.Now(),
	}
	e.refunds[f.ID] = f
	p.refundByKey[key] = f.ID
	p.refundByRef[f.Reference] = f.ID
	return http.StatusCreated, f.answer()
}

// settleAnswer is the answer of the payout settle control route.
type settleAnswer struct {
	Payout       EmulatedPayout `json:"payout"`
	Notification Delivery       `json:"notification"`
}

func (e *Emulator) controlSettle(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Outcome xaalis.ProviderState `json:"outcome"`
		Reason  string               `json:"reason"`
	}
	if err := decodeBody(r, &in); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	d, err := e.SettlePayout(id, in.Outcome, in.Reason)
	if err != nil {
		writeError(w, err)
		return
	}
	e.mu.Lock()
	o := *e.payouts[id]
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, settleAnswer{Payout: o, Notification: d})
}
