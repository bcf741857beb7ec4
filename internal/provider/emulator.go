package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// EmulatorOptions configure an Emulator. The zero value emulates the
// providers of the embedded configuration with its credentials.
type EmulatorOptions struct {
	// Config gives the providers, their countries, next actions, route
	// names and default credentials (default: the embedded defaults.json).
	Config *xaalis.Config
	// Now is the clock (default time.Now); notifications are signed with it.
	Now func() time.Time
	// HTTPClient sends notifications (default: a client with a 10 s timeout).
	HTTPClient *http.Client
	// APIKeys and NotifySecrets, by provider, override the configuration's
	// (the first route's api_key and notify_secret).
	APIKeys       map[string]string
	NotifySecrets map[string]string
	// Routes and Providers set the initial switches, by "provider/route"
	// and by provider.
	Routes    map[string]RouteSwitches
	Providers map[string]ProviderSwitches
	// Logger (default: discard).
	Logger *slog.Logger
}

// RouteSwitches are the failure switches of one route of a provider.
type RouteSwitches struct {
	// LatencyMS delays every answer.
	LatencyMS int `json:"latency_ms"`
	// ErrorRate is the share of requests answered 503, from 0 to 1.
	ErrorRate float64 `json:"error_rate"`
	// Down closes every connection without an answer.
	Down bool `json:"down"`
	// Timeout does the work, then never answers (past any client timeout).
	Timeout bool `json:"timeout"`
}

// ProviderSwitches are the switches of a whole provider.
type ProviderSwitches struct {
	// LoseCallbacks drops the provider's notifications.
	LoseCallbacks bool `json:"lose_callbacks"`
	// HoldPayouts keeps new payouts to ordinary numbers (and 0001)
	// pending until SettlePayout (POST /_control/payouts/{id}/settle).
	HoldPayouts bool `json:"hold_payouts"`
}

// RouteState is a route's switches and how many requests reached it.
type RouteState struct {
	RouteSwitches
	Requests int `json:"requests"`
}

// EmulatedProvider is the state of one provider in the emulator.
type EmulatedProvider struct {
	ProviderSwitches
	Routes map[string]RouteState `json:"routes"`
}

// EmulatorState is what GET /_control answers.
type EmulatorState struct {
	Providers   map[string]EmulatedProvider `json:"providers"`
	Collections int                         `json:"collections"`
	Payouts     int                         `json:"payouts"`
	Refunds     int                         `json:"refunds"`
}

// EmulatedCollection is a collection the emulator holds.
type EmulatedCollection struct {
	ID             string               `json:"id"`
	Provider       string               `json:"provider"`
	Route          string               `json:"route"` // the route that created it
	IdempotencyKey string               `json:"idempotency_key"`
	Reference      string               `json:"reference"`
	Amount         int64                `json:"amount"`
	Currency       string               `json:"currency"`
	Phone          string               `json:"phone"`
	Country        string               `json:"country"`
	PayerName      string               `json:"payer_name,omitempty"`
	SubMerchant    string               `json:"sub_merchant,omitempty"`
	NotifyURL      string               `json:"notify_url,omitempty"`
	ExpiresAt      time.Time            `json:"expires_at,omitzero"`
	Status         xaalis.ProviderState `json:"status"`
	Reason         string               `json:"reason,omitempty"`
	OTPAttempts    int                  `json:"otp_attempts"`
	// Requests counts the POSTs that reached it: the first and every
	// idempotent replay, on any route.
	Requests   int                `json:"requests"`
	NextAction *xaalis.NextAction `json:"next_action,omitempty"`
	Created    time.Time          `json:"created"`
	// Refunded is the sum of its refunds, in minor units.
	Refunded int64 `json:"refunded"`
}

// EmulatedPayout is a payout the emulator holds.
type EmulatedPayout struct {
	ID             string               `json:"id"`
	Provider       string               `json:"provider"`
	Route          string               `json:"route"` // the route that created it
	IdempotencyKey string               `json:"idempotency_key"`
	Reference      string               `json:"reference"`
	Amount         int64                `json:"amount"`
	Currency       string               `json:"currency"`
	Phone          string               `json:"phone"`
	Country        string               `json:"country"`
	RecipientName  string               `json:"recipient_name,omitempty"`
	NotifyURL      string               `json:"notify_url,omitempty"`
	Status         xaalis.ProviderState `json:"status"`
	Reason         string               `json:"reason,omitempty"`
	// Requests counts the POSTs that reached it: the first and every
	// idempotent replay, on any route.
	Requests int       `json:"requests"`
	Created  time.Time `json:"created"`
}

// EmulatedRefund is a refund the emulator holds.
type EmulatedRefund struct {
	ID             string               `json:"id"`
	Provider       string               `json:"provider"`
	Route          string               `json:"route"`
	IdempotencyKey string               `json:"idempotency_key"`
	Reference      string               `json:"reference"`
	CollectionID   string               `json:"collection_id"`
	Amount         int64                `json:"amount"`
	Currency       string               `json:"currency"`
	Status         xaalis.ProviderState `json:"status"`
	Reason         string               `json:"reason,omitempty"`
	Requests       int                  `json:"requests"`
	Created        time.Time            `json:"created"`
}

// Delivery reports one notification the emulator sent, or lost.
type Delivery struct {
	EventID string `json:"event_id"`
	URL     string `json:"url,omitempty"`
	Sent    bool   `json:"sent"`
	Lost    bool   `json:"lost,omitempty"` // lose_callbacks dropped it
	Status  int    `json:"status,omitempty"`
	Error   string `json:"error,omitempty"`
}

// EmulatorError is an error of the emulator's Go and control APIs.
type EmulatorError struct {
	Status  int
	Code    string
	Message string
}

func (e *EmulatorError) Error() string { return e.Code + ": " + e.Message }

func emuErr(status int, code, format string, args ...any) *EmulatorError {
	return &EmulatorError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Emulator serves the provider HTTP API of every provider under
// /{provider}/{route}/..., and its control API under /_control.
type Emulator struct {
	opts    EmulatorOptions
	api     *http.ServeMux
	control *http.ServeMux
	log     *slog.Logger

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu          sync.Mutex
	providers   map[string]*emuProvider
	collections map[string]*EmulatedCollection // by id
	payouts     map[string]*EmulatedPayout     // by id
	refunds     map[string]*EmulatedRefund     // by id
}

type emuProvider struct {
	name     string
	spec     xaalis.ProviderSpec
	apiKey   string
	secret   string
	switches ProviderSwitches
	routes   map[string]*RouteState
	byKey    map[string]string // Idempotency-Key -> collection id
	prefix   string

	// Payouts and refunds, shared by every route of the provider.
	payoutByKey map[string]string // Idempotency-Key -> payout id
	payoutByRef map[string]string // reference -> payout id
	refundByKey map[string]string // Idempotency-Key -> refund id
	refundByRef map[string]string // reference -> refund id
}

// maxHang bounds how long the timeout switch holds a request.
const maxHang = 2 * time.Minute

// NewEmulator returns an Emulator.
func NewEmulator(opts EmulatorOptions) *Emulator {
	if opts.Config == nil {
		cfg, err := EmulatorConfig(DefaultEmulatorBase)
		if err != nil {
			panic("provider: embedded configuration: " + err.Error())
		}
		opts.Config = cfg
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Emulator{
		opts:        opts,
		log:         opts.Logger.With("component", "provider-emulator"),
		done:        make(chan struct{}),
		providers:   make(map[string]*emuProvider),
		collections: make(map[string]*EmulatedCollection),
		payouts:     make(map[string]*EmulatedPayout),
		refunds:     make(map[string]*EmulatedRefund),
	}
	for name, spec := range opts.Config.Providers {
		p := &emuProvider{
			name: name, spec: spec, routes: make(map[string]*RouteState), byKey: make(map[string]string),
			payoutByKey: make(map[string]string), payoutByRef: make(map[string]string),
			refundByKey: make(map[string]string), refundByRef: make(map[string]string),
		}
		// An emulator speaks with its published credentials unless its
		// configuration names others.
		p.apiKey, p.secret = xaalis.EmulatorAPIKey(name), xaalis.EmulatorNotifySecret(name)
		if len(spec.Routes) > 0 {
			p.apiKey, p.secret = spec.Routes[0].APIKey, spec.Routes[0].NotifySecret
		}
		if k, ok := opts.APIKeys[name]; ok {
			p.apiKey = k
		}
		if s, ok := opts.NotifySecrets[name]; ok {
			p.secret = s
		}
		for _, rt := range spec.Routes {
			p.routes[rt.Name] = &RouteState{}
		}
		p.switches = opts.Providers[name]
		p.prefix = "col_" + strings.TrimPrefix(name, "channel_") + "_"
		e.providers[name] = p
	}
	for k, sw := range opts.Routes {
		prov, route, _ := strings.Cut(k, "/")
		if p, ok := e.providers[prov]; ok && route != "" {
			p.routes[route] = &RouteState{RouteSwitches: sw}
		}
	}

	e.api = http.NewServeMux()
	e.api.HandleFunc("POST /{provider}/{route}/collections", e.route(e.create))
	e.api.HandleFunc("GET /{provider}/{route}/collections/{id}", e.route(e.get))
	e.api.HandleFunc("GET /{provider}/{route}/collections", e.route(e.byReference))
	e.api.HandleFunc("POST /{provider}/{route}/collections/{id}/otp", e.route(e.otp))
	e.api.HandleFunc("POST /{provider}/{route}/payouts", e.route(e.createPayout))
	e.api.HandleFunc("GET /{provider}/{route}/payouts", e.route(e.getPayout))
	e.api.HandleFunc("POST /{provider}/{route}/refunds", e.route(e.createRefund))
	e.api.HandleFunc("GET /{provider}/{route}/refunds", e.route(e.getRefund))

	e.control = http.NewServeMux()
	e.control.HandleFunc("GET /_control", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, e.State())
	})
	e.control.HandleFunc("POST /_control/routes/{provider}/{route}", e.controlRoute)
	e.control.HandleFunc("POST /_control/providers/{provider}", e.controlProvider)
	e.control.HandleFunc("POST /_control/collections/{id}/payer", e.controlPayer)
	e.control.HandleFunc("POST /_control/collections/{id}/dispute", e.controlDispute)
	e.control.HandleFunc("POST /_control/payouts/{id}/settle", e.controlSettle)
	return e
}

// ServeHTTP serves the provider API and the control API.
func (e *Emulator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/_control" || strings.HasPrefix(r.URL.Path, "/_control/") {
		e.control.ServeHTTP(w, r)
		return
	}
	e.api.ServeHTTP(w, r)
}

// Close releases requests the timeout switch holds and waits for the
// notifications in flight.
func (e *Emulator) Close() {
	e.closeOnce.Do(func() { close(e.done) })
	e.wg.Wait()
}

// SetRoute sets the switches of one route of a provider.
func (e *Emulator) SetRoute(provider, route string, s RouteSwitches) error {
	if s.ErrorRate < 0 || s.ErrorRate > 1 || s.LatencyMS < 0 || route == "" {
		return emuErr(http.StatusBadRequest, "invalid_request", "error_rate must be within 0..1, latency_ms not negative")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.providers[provider]
	if !ok {
		return emuErr(http.StatusNotFound, "not_found", "no provider %q", provider)
	}
	rs := p.routeState(route)
	rs.RouteSwitches = s
	return nil
}

// SetProvider sets the switches of a provider.
func (e *Emulator) SetProvider(provider string, s ProviderSwitches) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	p, ok := e.providers[provider]
	if !ok {
		return emuErr(http.StatusNotFound, "not_found", "no provider %q", provider)
	}
	p.switches = s
	return nil
}

// State returns every provider's switches and counters.
func (e *Emulator) State() EmulatorState {
	e.mu.Lock()
	defer e.mu.Unlock()
	st := EmulatorState{
		Providers:   make(map[string]EmulatedProvider, len(e.providers)),
		Collections: len(e.collections),
		Payouts:     len(e.payouts),
		Refunds:     len(e.refunds),
	}
	for name, p := range e.providers {
		ep := EmulatedProvider{ProviderSwitches: p.switches, Routes: make(map[string]RouteState, len(p.routes))}
		for rn, rs := range p.routes {
			ep.Routes[rn] = *rs
		}
		st.Providers[name] = ep
	}
	return st
}

// Collection returns a copy of a collection the emulator holds.
func (e *Emulator) Collection(id string) (EmulatedCollection, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, ok := e.collections[id]
	if !ok {
		return EmulatedCollection{}, false
	}
	return c.copy(), true
}

// Collections returns copies of every collection, oldest first.
func (e *Emulator) Collections() []EmulatedCollection {
	e.mu.Lock()
	out := make([]EmulatedCollection, 0, len(e.collections))
	for _, c := range e.collections {
		out = append(out, c.copy())
	}
	e.mu.Unlock()
	slices.SortFunc(out, func(a, b EmulatedCollection) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

func (c *EmulatedCollection) copy() EmulatedCollection {
	out := *c
	if c.NextAction != nil {
		n := *c.NextAction
		out.NextAction = &n
	}
	return out
}

// PayerAct is the payer acting on a pending collection: its status
// becomes outcome and the signed notification is sent (unless the
// provider loses its callbacks) before PayerAct returns.
func (e *Emulator) PayerAct(id string, outcome xaalis.ProviderState) (Delivery, error) {
	switch outcome {
	case xaalis.ProviderSuccess, xaalis.ProviderFailed, xaalis.ProviderCancelled:
	default:
		return Delivery{}, emuErr(http.StatusBadRequest, "invalid_request", "outcome must be success, failed or cancelled")
	}
	e.mu.Lock()
	c, ok := e.collections[id]
	var err error
	switch {
	case !ok:
		err = emuErr(http.StatusNotFound, "not_found", "no collection %q", id)
	case c.Status != xaalis.ProviderPending:
		err = emuErr(http.StatusConflict, "not_pending", "the collection is already %s", c.Status)
	case MagicOf(c.Phone) == MagicNoPayer:
		err = emuErr(http.StatusConflict, ReasonNoPayer, "the collection has no payer (number ending %s)", MagicNoPayer)
	}
	if err != nil {
		e.mu.Unlock()
		return Delivery{}, err
	}
	c.Status, c.Reason = outcome, payerReason(outcome)
	ev, p := e.event(c, EventCollectionUpdated), e.providers[c.Provider]
	url, lose, secret := c.NotifyURL, p.switches.LoseCallbacks, p.secret
	e.mu.Unlock()
	return e.send(url, secret, ev, lose), nil
}

// OpenDispute reports a dispute of amount (minor units; 0 is the whole
// collection) on a collection, by a signed dispute.opened notification.
func (e *Emulator) OpenDispute(id string, amount int64, reason string) (Delivery, error) {
	if amount < 0 {
		return Delivery{}, emuErr(http.StatusBadRequest, "invalid_request", "amount must not be negative")
	}
	e.mu.Lock()
	c, ok := e.collections[id]
	if !ok {
		e.mu.Unlock()
		return Delivery{}, emuErr(http.StatusNotFound, "not_found", "no collection %q", id)
	}
	if amount == 0 || amount > c.Amount {
		amount = c.Amount
	}
	if reason == "" {
		reason = "payer_disputes_charge"
	}
	ev, p := e.event(c, EventDisputeOpened), e.providers[c.Provider]
	ev.Dispute = &EventDispute{Amount: amount, Currency: c.Currency, Reason: reason}
	url, lose, secret := c.NotifyURL, p.switches.LoseCallbacks, p.secret
	e.mu.Unlock()
	return e.send(url, secret, ev, lose), nil
}

func (e *Emulator) event(c *EmulatedCollection, typ string) Event {
	return Event{
		EventID:    randomID("evt_"),
		Type:       typ,
		Country:    c.Country,
		Collection: EventCollection{ID: c.ID, Reference: c.Reference, Status: string(c.Status), Reason: c.Reason},
	}
}

// send POSTs a signed notification, unless lost.
func (e *Emulator) send(url, secret string, ev Event, lose bool) Delivery {
	d := Delivery{EventID: ev.EventID, URL: url}
	if lose {
		d.Lost = true
		e.log.Info("notification lost", "event_id", ev.EventID, "type", ev.Type, "object", eventObject(ev))
		return d
	}
	if url == "" {
		d.Error = "no notify_url was given"
		return d
	}
	body, _ := json.Marshal(ev)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-e.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		d.Error = err.Error()
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign(secret, e.opts.Now(), body))
	resp, err := e.opts.HTTPClient.Do(req)
	if err != nil {
		d.Error = err.Error()
		e.log.Warn("notification failed", "event_id", ev.EventID, "url", url, "err", err)
		return d
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponse))
	resp.Body.Close()
	d.Sent, d.Status = true, resp.StatusCode
	e.log.Info("notification sent", "event_id", ev.EventID, "url", url, "status", resp.StatusCode)
	return d
}

// sendAsync sends a notification in the background (a settlement the
// provider API itself caused, such as a right OTP).
func (e *Emulator) sendAsync(url, secret string, ev Event, lose bool) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.send(url, secret, ev, lose)
	}()
}

func (p *emuProvider) routeState(route string) *RouteState {
	rs, ok := p.routes[route]
	if !ok {
		rs = &RouteState{}
		p.routes[route] = rs
	}
	return rs
}

// apiHandler handles one provider API call; it runs under no lock and
// returns the status and body to answer.
type apiHandler func(p *emuProvider, route string, r *http.Request) (int, any)

// route applies the route's switches and the api key check around h.
func (e *Emulator) route(h apiHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name, route := r.PathValue("provider"), r.PathValue("route")
		e.mu.Lock()
		p, ok := e.providers[name]
		var sw RouteSwitches
		var key string
		if ok {
			rs := p.routeState(route)
			rs.Requests++
			sw, key = rs.RouteSwitches, p.apiKey
		}
		e.mu.Unlock()
		if !ok {
			// Not not_found: a lookup by reference would read it as "this
			// route never received it", and a route whose base_url names
			// no provider would let a payout or refund be sent again.
			writeError(w, emuErr(http.StatusNotFound, "unknown_provider", "no provider %q", name))
			return
		}
		if sw.Down {
			abort(w)
			return
		}
		if sw.LatencyMS > 0 && !e.sleep(r.Context(), time.Duration(sw.LatencyMS)*time.Millisecond) {
			abort(w)
			return
		}
		if sw.ErrorRate > 0 && rand.Float64() < sw.ErrorRate {
			writeError(w, emuErr(http.StatusServiceUnavailable, "unavailable", "the provider is temporarily unavailable"))
			return
		}
		if got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !ok || key == "" || got != key {
			writeError(w, emuErr(http.StatusUnauthorized, "unauthorized", "the api key is missing or wrong"))
			return
		}
		status, body := h(p, route, r)
		if sw.Timeout {
			// The work is done; the answer never comes.
			e.sleep(r.Context(), maxHang)
			abort(w)
			return
		}
		writeJSON(w, status, body)
	}
}

// sleep waits d; false when the request or the emulator ended first.
func (e *Emulator) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-e.done:
	}
	return false
}

// abort closes the connection without an answer.
func abort(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset, like a refused connection
			}
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func decodeBody(r *http.Request, v any) *EmulatorError {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err != nil {
		return emuErr(http.StatusBadRequest, "invalid_request", "the body could not be read: %v", err)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return emuErr(http.StatusBadRequest, "invalid_request", "the body is not valid JSON: %v", err)
	}
	return nil
}

func (e *Emulator) create(p *emuProvider, route string, r *http.Request) (int, any) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		return errorBody(emuErr(http.StatusBadRequest, "idempotency_key_required", "the Idempotency-Key header is required"))
	}
	var in CollectionRequest
	if err := decodeBody(r, &in); err != nil {
		return errorBody(err)
	}
	country := xaalis.Country(in.Country)
	switch {
	case in.Amount <= 0:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_amount", "amount must be a positive integer of minor units"))
	case !xaalis.Currency(in.Currency).Valid():
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_currency", "unknown currency %q", in.Currency))
	case in.Phone == "":
		return errorBody(emuErr(http.StatusUnprocessableEntity, "invalid_phone", "phone is required"))
	case !p.spec.Serves(country):
		return errorBody(emuErr(http.StatusUnprocessableEntity, "country_not_served", "%s does not serve %q", p.name, in.Country))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if id, ok := p.byKey[key]; ok {
		c := e.collections[id]
		if c.Reference != in.Reference || c.Amount != in.Amount || c.Currency != in.Currency || c.Phone != in.Phone {
			return errorBody(emuErr(http.StatusConflict, "idempotency_conflict", "the Idempotency-Key was used with another collection"))
		}
		c.Requests++
		return http.StatusCreated, c.answer()
	}
	magic := MagicOf(in.Phone)
	switch magic {
	case MagicRefused:
		return errorBody(emuErr(http.StatusUnprocessableEntity, "payer_refused", "the payer's wallet refused the collection (number ending %s)", magic))
	case MagicUnreachable:
		return errorBody(emuErr(http.StatusServiceUnavailable, "unavailable", "the provider is unreachable (number ending %s)", magic))
	}
	c := &EmulatedCollection{
		ID:             randomID(p.prefix),
		Provider:       p.name,
		Route:          route,
		IdempotencyKey: key,
		Reference:      in.Reference,
		Amount:         in.Amount,
		Currency:       in.Currency,
		Phone:          in.Phone,
		Country:        in.Country,
		PayerName:      in.PayerName,
		SubMerchant:    in.SubMerchant,
		NotifyURL:      in.NotifyURL,
		ExpiresAt:      in.ExpiresAt,
		Status:         xaalis.ProviderPending,
		Requests:       1,
		Created:        e.opts.Now(),
	}
	if st, reason, ok := settleAtOnce(magic); ok {
		c.Status, c.Reason = st, reason
	} else {
		c.NextAction = nextAction(p.name, p.spec.NextAction, c.ID)
	}
	e.collections[c.ID] = c
	p.byKey[key] = c.ID
	return http.StatusCreated, c.answer()
}

// read is the collection as the provider's reads answer it.
func (c *EmulatedCollection) read() Collection {
	return Collection{ID: c.ID, Reference: c.Reference, Status: string(c.Status), Reason: c.Reason}
}

// answer is the creation's answer: its state, and what the payer must do
// while it is pending.
func (c *EmulatedCollection) answer() Collection {
	out := c.read()
	if c.Status == xaalis.ProviderPending && c.NextAction != nil {
		n := *c.NextAction
		out.NextAction = &n
	}
	return out
}

// find returns a collection of provider p; e.mu must be held.
func (e *Emulator) find(p *emuProvider, id string) (*EmulatedCollection, *EmulatorError) {
	c, ok := e.collections[id]
	if !ok || c.Provider != p.name {
		return nil, emuErr(http.StatusNotFound, "not_found", "no collection %q", id)
	}
	return c, nil
}

func (e *Emulator) get(p *emuProvider, _ string, r *http.Request) (int, any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.find(p, r.PathValue("id"))
	if err != nil {
		return errorBody(err)
	}
	return http.StatusOK, c.read()
}

// byReference answers GET {base}/collections?reference=: the collection
// created with that reference, or 404 not_found.
func (e *Emulator) byReference(p *emuProvider, _ string, r *http.Request) (int, any) {
	ref := r.URL.Query().Get("reference")
	if ref == "" {
		return errorBody(emuErr(http.StatusBadRequest, "invalid_request", "the reference query parameter is required"))
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.collections {
		if c.Provider == p.name && c.Reference == ref {
			return http.StatusOK, c.read()
		}
	}
	return errorBody(emuErr(http.StatusNotFound, CodeNotFound, "no collection with reference %q", ref))
}

func (e *Emulator) otp(p *emuProvider, _ string, r *http.Request) (int, any) {
	if p.spec.NextAction != xaalis.NextOTP {
		return errorBody(emuErr(http.StatusUnprocessableEntity, "otp_not_supported", "%s does not take one-time codes", p.name))
	}
	var in OTPRequest
	if err := decodeBody(r, &in); err != nil {
		return errorBody(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.find(p, r.PathValue("id"))
	if err != nil {
		return errorBody(err)
	}
	if c.Status == xaalis.ProviderPending {
		switch {
		case MagicOf(c.Phone) == MagicNoPayer:
			return http.StatusOK, Collection{ID: c.ID, Status: string(c.Status), Reason: ReasonNoPayer}
		case in.OTP == TestOTP:
			c.Status, c.Reason = xaalis.ProviderSuccess, ""
		default:
			c.OTPAttempts++
			c.Reason = ReasonWrongOTP
			if c.OTPAttempts >= MaxOTPAttempts {
				c.Status, c.Reason = xaalis.ProviderFailed, ReasonTooManyWrongOTP
			}
		}
		if c.Status != xaalis.ProviderPending {
			e.sendAsync(c.NotifyURL, p.secret, e.event(c, EventCollectionUpdated), p.switches.LoseCallbacks)
		}
	}
	return http.StatusOK, Collection{ID: c.ID, Status: string(c.Status), Reason: c.Reason}
}

func errorBody(err *EmulatorError) (int, any) {
	var b APIError
	b.Error.Code, b.Error.Message = err.Code, err.Message
	return err.Status, b
}

func writeError(w http.ResponseWriter, err error) {
	var ee *EmulatorError
	if !errors.As(err, &ee) {
		ee = emuErr(http.StatusInternalServerError, "internal", "%v", err)
	}
	status, body := errorBody(ee)
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encode"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// The control API.

func (e *Emulator) controlRoute(w http.ResponseWriter, r *http.Request) {
	var in struct {
		LatencyMS *int     `json:"latency_ms"`
		ErrorRate *float64 `json:"error_rate"`
		Down      *bool    `json:"down"`
		Timeout   *bool    `json:"timeout"`
	}
	if err := decodeBody(r, &in); err != nil {
		writeError(w, err)
		return
	}
	provider, route := r.PathValue("provider"), r.PathValue("route")
	e.mu.Lock()
	p, ok := e.providers[provider]
	var sw RouteSwitches
	if ok {
		sw = p.routeState(route).RouteSwitches
	}
	e.mu.Unlock()
	if !ok {
		writeError(w, emuErr(http.StatusNotFound, "not_found", "no provider %q", provider))
		return
	}
	if in.LatencyMS != nil {
		sw.LatencyMS = *in.LatencyMS
	}
	if in.ErrorRate != nil {
		sw.ErrorRate = *in.ErrorRate
	}
	if in.Down != nil {
		sw.Down = *in.Down
	}
	if in.Timeout != nil {
		sw.Timeout = *in.Timeout
	}
	if err := e.SetRoute(provider, route, sw); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e.State().Providers[provider].Routes[route])
}

func (e *Emulator) controlProvider(w http.ResponseWriter, r *http.Request) {
	var in struct {
		LoseCallbacks *bool `json:"lose_callbacks"`
		HoldPayouts   *bool `json:"hold_payouts"`
	}
	if err := decodeBody(r, &in); err != nil {
		writeError(w, err)
		return
	}
	provider := r.PathValue("provider")
	e.mu.Lock()
	p, ok := e.providers[provider]
	if ok && in.LoseCallbacks != nil {
		p.switches.LoseCallbacks = *in.LoseCallbacks
	}
	if ok && in.HoldPayouts != nil {
		p.switches.HoldPayouts = *in.HoldPayouts
	}
	e.mu.Unlock()
	if !ok {
		writeError(w, emuErr(http.StatusNotFound, "not_found", "no provider %q", provider))
		return
	}
	writeJSON(w, http.StatusOK, e.State().Providers[provider])
}

// controlAnswer is the answer of the payer and dispute control routes.
type controlAnswer struct {
	Collection   EmulatedCollection `json:"collection"`
	Notification Delivery           `json:"notification"`
}

func (e *Emulator) controlPayer(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Outcome xaalis.ProviderState `json:"outcome"`
	}
	if err := decodeBody(r, &in); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	d, err := e.PayerAct(id, in.Outcome)
	if err != nil {
		writeError(w, err)
		return
	}
	c, _ := e.Collection(id)
	writeJSON(w, http.StatusOK, controlAnswer{Collection: c, Notification: d})
}

func (e *Emulator) controlDispute(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Amount int64  `json:"amount"`
		Reason string `json:"reason"`
	}
	if err := decodeBody(r, &in); err != nil {
		writeError(w, err)
		return
	}
	id := r.PathValue("id")
	d, err := e.OpenDispute(id, in.Amount, in.Reason)
	if err != nil {
		writeError(w, err)
		return
	}
	c, _ := e.Collection(id)
	writeJSON(w, http.StatusOK, controlAnswer{Collection: c, Notification: d})
}

// ListenAndServe serves the emulator on addr until ctx ends, after
// printing "Provider emulator listening on http://ADDR" to stdout.
func (e *Emulator) ListenAndServe(ctx context.Context, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("provider emulator: %w", err)
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "Provider emulator listening on http://%s\n", ln.Addr())
	stopped, served := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		e.closeOnce.Do(func() { close(e.done) })
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err = srv.Serve(ln)
	close(served)
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("provider emulator: %w", err)
}

// RunEmulator serves an emulator of the configured providers with the
// default options on addr until ctx ends (xaalis provider-emulator).
func RunEmulator(ctx context.Context, addr string, stdout io.Writer) error {
	e := NewEmulator(EmulatorOptions{})
	defer e.Close()
	return e.ListenAndServe(ctx, addr, stdout)
}
