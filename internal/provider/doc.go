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
// the outcome. Simulator state is lost on restart: Status of a reference
// the simulator does not know answers pending with the reason
// "unknown_to_simulator".
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
// Every other number stays pending until the payer acts. A collection
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
//	GET {base}/collections/{id}          → 200 {"id","status","reason"}
//	POST {base}/collections/{id}/otp {"otp"} → 200 {"id","status","reason"}
//
// Errors: 4xx {"error":{"code","message"}} is a business refusal
// (gateway_error, no failover); 5xx, 429, timeouts and connection errors
// are route failures (failover).
//
// Notifications are POSTed by the provider to the collection's notify_url:
//
//	{"event_id","type":"collection.updated","country",
//	 "collection":{"id","status","reason"}}
//	{"event_id","type":"dispute.opened","country",
//	 "collection":{"id","status","reason"},
//	 "dispute":{"amount","currency","reason"}}
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
// collections. It applies the magic numbers, checks the api key (401) and
// the test OTP, and has switches, set through its Go API or its control
// API (JSON):
//
//	GET  /_control                          the switches and counters
//	POST /_control/routes/{provider}/{route} {"latency_ms","error_rate","down","timeout"}
//	POST /_control/providers/{provider}     {"lose_callbacks"}
//	POST /_control/collections/{id}/payer   {"outcome":"success|failed|cancelled"}
//	POST /_control/collections/{id}/dispute {"amount","reason"}
//
// down closes every connection of the route without an answer; timeout
// records the request and then never answers; error_rate answers that
// share of requests 503 before doing anything; lose_callbacks drops the
// provider's notifications (Status still reports the outcome, which is how
// reconciliation recovers). The payer and dispute control routes send the
// signed notification before answering, and report its delivery.
package provider
