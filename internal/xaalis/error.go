package xaalis

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Code is one of the specification's error codes. Handlers never invent
// codes: every Code used in the project is listed in Catalogue.
type Code string

// Authentication and authorisation.
const (
	ECredentialsMissing  Code = "missing_credentials"
	EInvalidAPIKey       Code = "invalid_api_key"
	EUnauthorized        Code = "unauthorized"
	EIPNotAllowed        Code = "ip_not_allowed"
	ETestKeyInProduction Code = "test_key_in_production"
	EScopeInsufficient   Code = "scope_insufficient"
	ELivemodeMismatch    Code = "livemode_mismatch"
	EForbidden           Code = "forbidden"
)

// Idempotency.
const (
	EIdempotencyKeyRequired Code = "idempotency_key_required"
	EIdempotencyKeyTooLong  Code = "idempotency_key_too_long"
	EIdempotencyConflict    Code = "idempotency_conflict"
)

// Payment and payout validation (all 422).
const (
	EValidation                    Code = "validation_error"
	EMerchantInactive              Code = "merchant_inactive"
	EMerchantKYCRequired           Code = "merchant_kyc_required"
	EPayoutsDisabled               Code = "payouts_disabled"
	EProviderUnavailable           Code = "provider_unavailable"
	EProviderCountryUnsupported    Code = "provider_country_unsupported"
	EProviderPayoutUnsupported     Code = "provider_payout_unsupported"
	EMerchantProviderNotAuthorized Code = "merchant_provider_not_authorized"
	EAmountMustBePositive          Code = "amount_must_be_positive"
	EAmountBelowMerchantMinimum    Code = "amount_below_merchant_minimum"
	EAmountBelowProviderMinimum    Code = "amount_below_provider_minimum"
	EAmountAboveMerchantMaximum    Code = "amount_above_merchant_maximum"
	EDailyLimitExceeded            Code = "daily_limit_exceeded"
	EMerchantLimitExceeded         Code = "merchant_limit_exceeded"
	EBCEAOLimitExceeded            Code = "bceao_limit_exceeded"
	EInvalidPhoneNumber            Code = "invalid_phone_number"
	EInsufficientBalance           Code = "insufficient_balance"
	EFeesUnavailable               Code = "fees_unavailable"
)

// Refunds.
const (
	ETransactionNotFound             Code = "transaction_not_found"
	ETransactionNotRefundable        Code = "transaction_not_refundable"
	ENonPaymentTransactionRefund     Code = "non_payment_transaction_refund"
	ETransactionAlreadyFullyRefunded Code = "transaction_already_fully_refunded"
	ERefundExceedsRefundable         Code = "refund_exceeds_refundable"
	ERefundNotSupported              Code = "refund_not_supported"
)

// Splits.
const (
	ESplitItemsRequired            Code = "split_items_required"
	ENonPaymentTransactionSplit    Code = "non_payment_transaction_split"
	ETransactionNotSplittable      Code = "transaction_not_splittable"
	ESplitTotalExceedsTransaction  Code = "split_total_exceeds_transaction"
	ESplitsExceedTransactionAmount Code = "splits_exceed_transaction_amount"
	EBeneficiaryNotActive          Code = "beneficiary_not_active"
)

// Subscriptions.
const (
	ESubscriptionPlanNotAvailable Code = "subscription_plan_not_available"
	ESubscriptionCustomerMismatch Code = "subscription_customer_mismatch"
	ESubscriptionAlreadyInStatus  Code = "subscription_already_in_status"
)

// Disputes. The specification's table has no code for answering a
// dispute that no longer needs a response; this one names it.
const (
	EDisputeNotRespondable Code = "dispute_not_respondable"
)

// Inbound provider notifications.
const (
	EInvalidSignature           Code = "invalid_signature"
	EDuplicate                  Code = "duplicate"
	EProviderUnavailableWebhook Code = "provider_unavailable_webhook"
)

// Providers and infrastructure.
const (
	EGatewayUnavailable Code = "gateway_unavailable"
	EGatewayError       Code = "gateway_error"
	ENotFound           Code = "not_found"
	EMethodNotAllowed   Code = "method_not_allowed"
	ETooManyRequests    Code = "too_many_requests"
	EInternal           Code = "api_error"
	// EServiceUnavailable: Xaalis itself cannot take the request now (its
	// database is unreachable, full, or has more writes queued than it
	// takes); nothing was done, retry after Retry-After.
	EServiceUnavailable Code = "service_unavailable"
)

// Malformed requests. The specification gives 400 "malformed request
// (missing header, invalid JSON)" no code of its own; these two name it. A
// body holding a key twice is malformed too (DuplicateKey).
const (
	EInvalidRequest  Code = "invalid_request"
	ERequestTooLarge Code = "request_too_large"
)

// CatalogueEntry is one row of the error table: a code, its HTTP status,
// the message clients see when no more specific one is given, the group
// it belongs to in the docs, and the context fields it carries.
type CatalogueEntry struct {
	Code    Code
	Status  int
	Message string
	Group   string
	Context []string
}

// Catalogue is the one table from code to HTTP status and message. The
// order is the order of docs/errors.md, which is generated from it.
var Catalogue = []CatalogueEntry{
	{ECredentialsMissing, http.StatusUnauthorized, "No API key was given. Send it as `Authorization: Bearer <key>` or `X-API-Key: <key>`.", "Authentication and authorization", nil},
	{EInvalidAPIKey, http.StatusUnauthorized, "The API key is unknown, revoked or expired.", "Authentication and authorization", nil},
	{EUnauthorized, http.StatusUnauthorized, "Authentication is required.", "Authentication and authorization", nil},
	{EIPNotAllowed, http.StatusUnauthorized, "The request comes from an IP address outside the allowlist of the key or the merchant account.", "Authentication and authorization", nil},
	{ETestKeyInProduction, http.StatusUnauthorized, "Test keys are not accepted by this live-only installation.", "Authentication and authorization", nil},
	{EScopeInsufficient, http.StatusForbidden, "The API key lacks the scope this route requires.", "Authentication and authorization", []string{"required_scope"}},
	{ELivemodeMismatch, http.StatusForbidden, "The object belongs to the other mode: test keys reach only test objects and live keys only live objects.", "Authentication and authorization", nil},
	{EForbidden, http.StatusForbidden, "This key may not perform this action.", "Authentication and authorization", nil},

	{EIdempotencyKeyRequired, http.StatusBadRequest, "The Idempotency-Key header is required on every POST, PUT, PATCH and DELETE.", "Idempotency", nil},
	{EIdempotencyKeyTooLong, http.StatusBadRequest, "The Idempotency-Key header is longer than 255 characters.", "Idempotency", []string{"max_length"}},
	{EIdempotencyConflict, http.StatusConflict, "This Idempotency-Key was used with a different request, or a request with it is still in flight.", "Idempotency", nil},

	{EValidation, http.StatusUnprocessableEntity, "The request has invalid fields; see errors.", "Payment and payout validation", nil},
	{EMerchantInactive, http.StatusUnprocessableEntity, "The merchant account is not active.", "Payment and payout validation", []string{"status"}},
	{EMerchantKYCRequired, http.StatusUnprocessableEntity, "Live payments need the merchant's KYC to be approved.", "Payment and payout validation", nil},
	{EPayoutsDisabled, http.StatusUnprocessableEntity, "Payouts are not enabled on this account.", "Payment and payout validation", nil},
	{EProviderUnavailable, http.StatusUnprocessableEntity, "The provider is unknown, disabled or not configured.", "Payment and payout validation", []string{"provider"}},
	{EProviderCountryUnsupported, http.StatusUnprocessableEntity, "The provider does not serve the target country.", "Payment and payout validation", []string{"provider", "country"}},
	{EProviderPayoutUnsupported, http.StatusUnprocessableEntity, "The provider supports payments but not payouts.", "Payment and payout validation", []string{"provider"}},
	{EMerchantProviderNotAuthorized, http.StatusUnprocessableEntity, "The merchant's provider whitelist excludes this provider.", "Payment and payout validation", []string{"provider"}},
	{EAmountMustBePositive, http.StatusUnprocessableEntity, "The amount must be greater than zero.", "Payment and payout validation", nil},
	{EAmountBelowMerchantMinimum, http.StatusUnprocessableEntity, "The amount is below the merchant's minimum.", "Payment and payout validation", []string{"minimum", "currency"}},
	{EAmountBelowProviderMinimum, http.StatusUnprocessableEntity, "The amount is below the provider's minimum.", "Payment and payout validation", []string{"minimum", "provider", "currency"}},
	{EAmountAboveMerchantMaximum, http.StatusUnprocessableEntity, "The amount is above the merchant's per-transaction maximum.", "Payment and payout validation", []string{"maximum", "currency"}},
	{EDailyLimitExceeded, http.StatusUnprocessableEntity, "The merchant's daily transfer ceiling is reached.", "Payment and payout validation", []string{"limit", "currency"}},
	{EMerchantLimitExceeded, http.StatusUnprocessableEntity, "A daily or monthly limit of the merchant account is exceeded.", "Payment and payout validation", []string{"limit", "period", "currency"}},
	{EBCEAOLimitExceeded, http.StatusUnprocessableEntity, "The payer's ceiling over a rolling 30 days (BCEAO rules) would be exceeded.", "Payment and payout validation", []string{"tier", "ceiling"}},
	{EInvalidPhoneNumber, http.StatusUnprocessableEntity, "The phone number is not a valid E.164 number for the target country.", "Payment and payout validation", []string{"reason", "suggestion", "country", "expected_country"}},
	{EInsufficientBalance, http.StatusUnprocessableEntity, "The available balance does not cover the amount plus fees.", "Payment and payout validation", []string{"currency", "available", "required"}},
	{EFeesUnavailable, http.StatusUnprocessableEntity, "No fee grid exists for this provider and country.", "Payment and payout validation", []string{"provider", "country"}},

	{ETransactionNotFound, http.StatusNotFound, "No transaction with this id or reference exists for the merchant.", "Refunds", []string{"transaction_id"}},
	{ETransactionNotRefundable, http.StatusUnprocessableEntity, "Only a payment in status success can be refunded.", "Refunds", []string{"status"}},
	{ENonPaymentTransactionRefund, http.StatusUnprocessableEntity, "Only payments can be refunded.", "Refunds", []string{"type"}},
	{ETransactionAlreadyFullyRefunded, http.StatusUnprocessableEntity, "The payment is already fully refunded.", "Refunds", nil},
	{ERefundExceedsRefundable, http.StatusUnprocessableEntity, "The amount exceeds what remains refundable.", "Refunds", []string{"requested", "refundable", "already_refunded"}},
	{ERefundNotSupported, http.StatusUnprocessableEntity, "The provider cannot refund automatically: pay the payer out and mark the payment refunded.", "Refunds", []string{"provider"}},

	{ESplitItemsRequired, http.StatusUnprocessableEntity, "The items list is empty.", "Splits", nil},
	{ENonPaymentTransactionSplit, http.StatusUnprocessableEntity, "Only payments can be split.", "Splits", []string{"type"}},
	{ETransactionNotSplittable, http.StatusUnprocessableEntity, "The payment's status does not allow splitting.", "Splits", []string{"status"}},
	{ESplitTotalExceedsTransaction, http.StatusUnprocessableEntity, "The sum of the splits exceeds the payment amount.", "Splits", []string{"total_split", "transaction_amount"}},
	{ESplitsExceedTransactionAmount, http.StatusUnprocessableEntity, "Existing and new splits together exceed the payment amount; reload and repeat.", "Splits", nil},
	{EBeneficiaryNotActive, http.StatusUnprocessableEntity, "The beneficiary merchant is not active.", "Splits", []string{"beneficiary_merchant_id"}},

	{ESubscriptionPlanNotAvailable, http.StatusUnprocessableEntity, "The plan is missing, inactive or not this merchant's.", "Subscriptions", []string{"plan_id"}},
	{ESubscriptionCustomerMismatch, http.StatusUnprocessableEntity, "The customer belongs to another merchant.", "Subscriptions", []string{"customer_id"}},
	{ESubscriptionAlreadyInStatus, http.StatusUnprocessableEntity, "The subscription is already cancelled or expired.", "Subscriptions", []string{"status"}},

	{EDisputeNotRespondable, http.StatusUnprocessableEntity, "The dispute does not need a response any more.", "Disputes", []string{"status"}},

	{EInvalidSignature, http.StatusUnauthorized, "The notification's signature or timestamp was rejected.", "Inbound provider notifications", nil},
	{EDuplicate, http.StatusOK, "The notification was already handled; nothing was done.", "Inbound provider notifications", nil},
	{EProviderUnavailableWebhook, http.StatusNotFound, "The provider is disabled for this slug or country.", "Inbound provider notifications", []string{"provider"}},

	{EGatewayUnavailable, http.StatusServiceUnavailable, "The provider is temporarily unreachable; retry after Retry-After seconds.", "Providers and infrastructure", []string{"provider"}},
	{EGatewayError, http.StatusBadGateway, "The provider refused the request with a business error.", "Providers and infrastructure", []string{"provider"}},
	{ENotFound, http.StatusNotFound, "No such resource exists for this merchant.", "Providers and infrastructure", nil},
	{EMethodNotAllowed, http.StatusMethodNotAllowed, "This route does not accept this HTTP method; see the Allow header.", "Providers and infrastructure", nil},
	{ETooManyRequests, http.StatusTooManyRequests, "Too many requests; retry after Retry-After seconds.", "Providers and infrastructure", nil},
	{EServiceUnavailable, http.StatusServiceUnavailable, "The service cannot take this request right now; nothing was done: retry after Retry-After seconds.", "Providers and infrastructure", nil},
	{EInternal, http.StatusInternalServerError, "An internal error occurred; report it with the request id.", "Providers and infrastructure", []string{"request_id"}},

	{EInvalidRequest, http.StatusBadRequest, "The request is malformed: a required header is missing, or the body is not one JSON object, or it holds a key twice (`context.key` names the key), or its query string cannot be read (a stray `%` or `;`).", "Malformed requests", []string{"key"}},
	{ERequestTooLarge, http.StatusRequestEntityTooLarge, "The request body is too large.", "Malformed requests", []string{"max_bytes"}},
}

var catalogueIndex = func() map[Code]CatalogueEntry {
	m := make(map[Code]CatalogueEntry, len(Catalogue))
	for _, e := range Catalogue {
		if _, dup := m[e.Code]; dup {
			panic("xaalis: duplicate error code " + string(e.Code))
		}
		m[e.Code] = e
	}
	return m
}()

// Lookup returns the catalogue row of a code and whether it exists.
func Lookup(c Code) (CatalogueEntry, bool) {
	e, ok := catalogueIndex[c]
	return e, ok
}

// DocumentationURL is where the public docs describe a code.
func DocumentationURL(c Code) string { return "https://docs.xaalis.dev/errors#" + string(c) }

// Error is the one error type of the domain. Anything else reaching the
// HTTP layer is an internal error.
type Error struct {
	Code    Code
	Message string              // empty: the catalogue's message
	Context map[string]any      // structured data the code carries
	Fields  map[string][]string // validation_error only: field -> messages
	// RetryAfter, when set, is sent as the Retry-After header.
	RetryAfter time.Duration
	// Allow lists the methods of a 405 answer.
	Allow []string
	// Cause is the failure behind the answer, for the logs only (a
	// service_unavailable's driver error); clients never see it.
	Cause error
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Cause }

func (e *Error) Error() string { return string(e.Code) + ": " + e.Text() }

// Text is the message clients see: the error's own, else the catalogue's.
func (e *Error) Text() string {
	if e.Message == "" {
		if c, ok := Lookup(e.Code); ok {
			return c.Message
		}
	}
	return e.Message
}

// Status is the HTTP status of the error's code; unknown codes are 500.
func (e *Error) Status() int {
	if c, ok := Lookup(e.Code); ok {
		return c.Status
	}
	return http.StatusInternalServerError
}

// Errorf returns an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// E returns an *Error with the catalogue's message and the given context,
// given as alternating keys and values.
func E(code Code, kv ...any) *Error {
	e := &Error{Code: code}
	if len(kv) > 0 {
		e.Context = make(map[string]any, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			e.Context[kv[i].(string)] = kv[i+1]
		}
	}
	return e
}

// ValidationErrors collects per-field messages; Err returns nil when empty.
type ValidationErrors map[string][]string

// Add records one message for a field, once: two checks that find the
// same fault (the metadata's key count, on the request and on what it
// keeps) tell the client once.
func (v ValidationErrors) Add(field, msg string) {
	if !slices.Contains(v[field], msg) {
		v[field] = append(v[field], msg)
	}
}

// Err returns a validation_error carrying the fields, or nil.
func (v ValidationErrors) Err() error {
	if len(v) == 0 {
		return nil
	}
	return &Error{Code: EValidation, Fields: v}
}

// ErrorCode returns the code of the first *Error in err's chain, "" for
// no error, or api_error when err is not a domain error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrNotFound is the generic not_found error.
var ErrNotFound = &Error{Code: ENotFound}
