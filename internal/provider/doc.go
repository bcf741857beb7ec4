// Package provider reaches the mobile-money providers (channel_a,
// channel_b, channel_c) for Xaalis: it implements xaalis.Gateway.
//
// # Modes
//
// Test mode (xaalis.ModeTest) goes to in-process simulators, one per
// provider of the configuration. They keep real state in memory: a
// collection stays pending until the payer acts (the hosted page's test
// buttons or the simulate test helper, both through Gateway.PayerAction),
// the payer enters the test OTP (channel_b), or a magic phone number fixes
// the outcome. Simulator state is lost on restart, and each simulator
// remembers only its last Options.SimulatorMemory collections, payouts
// and refunds (DefaultSimulatorMemory), forgetting older ones the same
// way: Status of a reference the simulator does not know answers pending
// with the reason "unknown_to_simulator".
//
// The simulators make payouts and refunds too, settled at once (see
// below). A payout is kept by its Reference: the same Reference answers
// the first payout (reused with another amount or recipient:
// gateway_error), PayoutStatus finds it, and after a restart PayoutStatus
// answers not_found (test money only, so sending again is harmless). A
// refund of a collection the simulator knows needs the collection in
// state success and enough left (the simulator keeps the total refunded
// per collection; more is gateway_error); a refund of a collection it
// does not know (made before a restart) succeeds, since the simulator
// cannot tell. Refunds are idempotent on their Reference too.
//
// Live mode (xaalis.ModeLive) goes to HTTP adapters, one per route of the
// provider's configuration (routes: direct, aggregator, ...), through
// routing and failover. Every route has a circuit breaker: closed, open
// after Options.BreakerThreshold consecutive failures (default 3),
// half_open after Options.BreakerCooldown (default 30 s) where one trial
// request is let through; success closes it, failure reopens it.
// Initiate tries the routes in order, skipping open breakers; a failure
// before any money moved (timeout, HTTP 5xx or 429, connection refused or
// closed) is recorded and the next route is tried with the same
// Idempotency-Key. A business refusal (HTTP 4xx) is gateway_error (502)
// and no other route is tried. No usable route, or every route failed, is
// gateway_unavailable (503) with RetryAfter: the time until the earliest
// open breaker half-opens (at least 1 s), or 5 s when the routes simply
// failed and no breaker is open. Initiation.Route names the route that
// served and Initiation.RouteReason says why: "primary", or "failover: "
// followed by each route passed over and its cause, for example
// "failover: direct: timeout" or "failover: direct: circuit open".
// Status and SubmitOTP go to the route that served the initiation first
// and fall back to the others when it is down.
//
// # Payouts and refunds: failover only when nothing was sent
//
// Payout tries the routes in order, Refund the payment's route first, but
// a route is passed over only when the request provably never reached
// the provider: the connection was refused (or never made), or the route
// answered or closed the connection before accepting the body. Payouts
// and refunds are sent with "Expect: 100-continue", so the body (amount,
// recipient) leaves Xaalis only once the provider asks for it; when the
// call fails and the transport never read the body, the body is sealed
// (it can no longer be sent) and the failure is "unsent". The emulator's
// down switch and its error_rate 503s answer before reading the body, so
// they fail over. A timeout, a 5xx or a broken connection after the body
// was sent is an unknown outcome: Payout and Refund return
// gateway_unavailable (RetryAfter 5 s) at once and try no other route.
// Why: a payout moves money without anyone's approval (a duplicated
// collection still needs the payer to approve it twice; a duplicated
// payout is simply paid twice and cannot be pulled back), the request
// whose answer was lost may still be executing, and a second route (an
// aggregator in front of the same wallet) need not share the first
// route's idempotency store. So the caller asks PayoutStatus by the
// Reference: found, it has the outcome; not_found, nothing was made and
// sending again with the same Reference is safe. The caller should send
// again only then: Payout cannot tell a first attempt from a resend, and
// a resend whose first route now refuses connections would fail over
// although the lost attempt may have been made on that route. A refund has no status
// call: it is sent again with the same Reference, which the provider
// answers with the first refund. Options.HTTPClient's transport must set
// ExpectContinueTimeout for this (http.DefaultTransport does, 1 s; a
// provider that ignores the Expect header receives the body after it);
// with 0 the body goes at once, and only refused connections fail over.
//
// PayoutStatus is read-only: it asks the routes in order and returns the
// first answer that knows the Reference. It returns xaalis.ErrNotFound
// (not_found) only when EVERY route answered 404 not_found; when a route
// could not be asked (down, timeout, open breaker) it returns
// gateway_unavailable, because that route might hold the payout and
// not_found would invite a second one.
//
// # Magic payer phone numbers
//
// The outcome of a collection is fixed by the LAST FOUR DIGITS of the
// payer's E.164 number, in any country, both in the simulators (test
// mode) and in the provider emulator:
//
//	…0001  settles success at once (Initiation.State success)
//	…0002  fails at once, reason insufficient_funds
//	…0003  is cancelled at once, reason payer_cancelled
//	…0004  stays pending forever: there is no payer, so payer actions
//	       are refused and OTPs go nowhere (for expiry tests)
//	…0005  the provider refuses the initiation: gateway_error (502)
//	…0006  the provider is unreachable: gateway_unavailable (503) with
//	       RetryAfter 30 s in test mode; the emulator answers HTTP 503, so
//	       in live mode every route fails (and counts against its breaker)
//
// Every other number stays pending until the payer acts.
//
// Payouts are decided by the RECIPIENT's number, the same way, and
// settle at once (no notification follows):
//
//	…0001  success (as every ordinary number)
//	…0002  failed, reason recipient_wallet_rejected
//	…0003  cancelled, reason payout_cancelled (no money moved)
//	…0004  pending forever: PayoutStatus keeps answering pending
//	…0005  refused: gateway_error; nothing is recorded (PayoutStatus:
//	       not_found), the caller records the payout failed
//	…0006  unreachable: gateway_unavailable with RetryAfter (30 s in test
//	       mode; in live mode the emulator answers 503 after reading the
//	       request, an unknown outcome, and records nothing)
//
// A provider whose configuration has payouts false answers Payout and
// PayoutStatus with provider_payout_unsupported, one with refunds false
// answers Refund with refund_not_supported, in both modes. Refunds settle
// success at once. A collection
// that settles at once is final in the initiation's answer: no
// notification follows it. The test one-time code of OTP providers
// (channel_b) is TestOTP, "123456": the right code settles success, a
// wrong one leaves the collection pending with reason wrong_otp, and the
// third wrong code fails it with reason too_many_wrong_codes. The
// constants TestPhoneSuccess … TestPhoneUnreachable are Senegalese
// examples; TestPhone builds one for any UEMOA country.
//
// # Provider HTTP API
//
// One HTTP API is spoken by the adapters and served by the Emulator for
// the three providers. {base} is a route's base_url (for the emulator,
// http://HOST/{provider}/{route}). Amounts are integers in minor units
// (hundredths of the currency unit), times RFC 3339.
//
//	POST {base}/collections
//	  Authorization: Bearer <api_key>
//	  Idempotency-Key: <reference>
//	  {"reference","amount","currency","phone","country","payer_name",
//	   "sub_merchant","notify_url","expires_at"}
//	→ 201 {"id","status":"pending|success|failed|cancelled",
//	       "next_action":{"type","redirect_url","ussd_code","instructions"}|null,
//	       "reason"}
//	  The same Idempotency-Key answers the same collection, on any route.
//
//	GET {base}/collections/{id}          → 200 {"id","reference","status","reason"}
//	GET {base}/collections?reference=<reference>
//	→ 200 {"id","reference","status","reason"}
//	→ 404 {"error":{"code":"not_found"}}  the provider never received it
//	  Asked at expires_at about a payment whose creation answer was lost.
//	POST {base}/collections/{id}/otp {"otp"} → 200 {"id","status","reason"}
//
//	POST {base}/payouts
//	  Authorization: Bearer <api_key>
//	  Idempotency-Key: <reference>
//	  Expect: 100-continue
//	  {"reference","amount","currency","phone","country",
//	   "recipient_name","notify_url"}
//	→ 201 {"id","reference","status":"success|failed|cancelled|pending","reason"}
//	  The same Idempotency-Key (or reference) answers the same payout, on
//	  any route; reused with another amount, currency or phone: 409.
//
//	GET {base}/payouts?reference=<reference>
//	→ 200 {"id","reference","status","reason"}
//	→ 404 {"error":{"code":"not_found"}}  the provider never received it
//
//	POST {base}/refunds
//	  Authorization, Idempotency-Key: <reference>, Expect: 100-continue
//	  {"reference","collection_id","amount","currency"}
//	→ 201 {"id","reference","status","reason"}
//	  The same Idempotency-Key (or reference) answers the same refund.
//
//	GET {base}/refunds?reference=<reference>
//	→ 200 {"id","reference","status","reason"}
//	→ 404 {"error":{"code":"not_found"}}  the provider never received it
//	  Asked before a refund whose first call's answer was lost (its process
//	  stopped) is sent again: sent again blind, it might go to another
//	  route, which need not share the first one's idempotency.
//
// Errors: 4xx {"error":{"code","message"}} is a business refusal
// (gateway_error, no failover); 5xx, 429, timeouts and connection errors
// are route failures (failover, for payouts and refunds only when the
// body was not sent). The codes payout_unsupported and refund_unsupported
// (422) become provider_payout_unsupported and refund_not_supported; a
// 404 not_found answers a lookup by reference (GET /collections, /payouts,
// /refunds ?reference=) the route does not know. A lookup goes on to the
// next route after any other refusal, as after a failure, and answers
// not_found only when every route did: a refusal says nothing of what
// the route holds. The emulator answers a path naming no provider 404
// unknown_provider (not not_found); its other refusals
// include recipient_refused (0005), collection_not_found,
// collection_not_refundable, refund_exceeds_collected and
// idempotency_conflict.
//
// Notifications are POSTed by the provider to the collection's notify_url.
// A collection's reference echoes the request's (optional): it names a
// payment whose creation answer never came back (a timeout after the
// provider recorded it), which has no provider id yet:
//
//	{"event_id","type":"collection.updated","country",
//	 "collection":{"id","reference","status","reason"}}
//	{"event_id","type":"dispute.opened","country",
//	 "collection":{"id","reference","status","reason"},
//	 "dispute":{"amount","currency","reason"}}
//
// and to a payout's notify_url:
//
//	{"event_id","type":"payout.updated","country",
//	 "payout":{"id","reference","status","reason"}}
//
// VerifyNotification gives a payout's notification as a
// xaalis.Notification whose ProviderRef is the payout's provider id (the
// PayoutResult.ProviderRef of Payout), with its State and Reason; EventID
// is the provider's event id, as for collections.
//
// signed in the header
//
//	X-Provider-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(notify_secret, t + "." + body)>
//
// Several v1 entries may be given. Gateway.VerifyNotification accepts a
// signature made with the notify_secret of any route of the provider,
// compares in constant time and rejects timestamps more than 300 s away
// from now (invalid_signature, 401). A provider that is unknown, disabled,
// or disabled for (or not serving) the notification's country answers
// provider_unavailable_webhook (404).
//
// # Emulator
//
// Emulator serves that API for every provider under
// /{provider}/{route}/...: the routes of one provider share one store of
// collections, payouts and refunds. A provider whose configuration has
// payouts (refunds) false answers its payout (refund) calls 422
// payout_unsupported (refund_unsupported). It applies the magic numbers, checks the api key (401) and
// the test OTP, and has switches, set through its Go API or its control
// API (JSON):
//
//	GET  /_control                          the switches and counters
//	POST /_control/routes/{provider}/{route} {"latency_ms","error_rate","down","timeout"}
//	POST /_control/providers/{provider}     {"lose_callbacks","hold_payouts"}
//	POST /_control/collections/{id}/payer   {"outcome":"success|failed|cancelled"}
//	POST /_control/collections/{id}/dispute {"amount","reason"}
//	POST /_control/payouts/{id}/settle      {"outcome":"success|failed|cancelled","reason"}
//
// down closes every connection of the route without an answer; timeout
// records the request and then never answers; error_rate answers that
// share of requests 503 before doing anything; lose_callbacks drops the
// provider's notifications (Status still reports the outcome, which is how
// reconciliation recovers). The payer and dispute control routes send the
// signed notification before answering, and report its delivery.
//
// GET /_control counts the collections, payouts and refunds. timeout
// records a payout (or refund) and then never answers: the caller's
// outcome is unknown while the provider made it, and PayoutStatus finds
// it. hold_payouts keeps new payouts that would succeed at once pending;
// the settle control route (Go: SettlePayout) settles a pending payout
// and sends its signed payout.updated notification; a payout to a number
// ending 0004 never settles (409). Emulator.Payout, Payouts and Refunds
// show what the emulator holds.
package provider
