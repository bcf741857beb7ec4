// The enumerations of api/openapi.yaml, value for value: TestContractSchemas
// fails when one differs from the contract.

package client

// Currency is the contract's Currency.
type Currency string

// The values of Currency.
const (
	XOF Currency = "XOF"
	EUR Currency = "EUR"
	USD Currency = "USD"
)

// Interval is the contract's Interval.
type Interval string

// The values of Interval.
const (
	IntervalDay   Interval = "day"
	IntervalWeek  Interval = "week"
	IntervalMonth Interval = "month"
	IntervalYear  Interval = "year"
)

// SubscriptionStatus is the contract's SubscriptionStatus.
type SubscriptionStatus string

// The values of SubscriptionStatus.
const (
	SubscriptionActive    SubscriptionStatus = "active"
	SubscriptionCancelled SubscriptionStatus = "cancelled"
	SubscriptionExpired   SubscriptionStatus = "expired"
)

// Country is the contract's Country.
type Country string

// The values of Country.
const (
	CountrySN Country = "SN"
	CountryCI Country = "CI"
	CountryML Country = "ML"
	CountryBF Country = "BF"
	CountryTG Country = "TG"
	CountryBJ Country = "BJ"
	CountryNE Country = "NE"
	CountryGW Country = "GW"
)

// Provider is the contract's Provider.
type Provider string

// The values of Provider.
const (
	ProviderChannelA Provider = "channel_a"
	ProviderChannelB Provider = "channel_b"
	ProviderChannelC Provider = "channel_c"
)

// TransactionStatus is the contract's TransactionStatus.
type TransactionStatus string

// The values of TransactionStatus.
const (
	StatusInitiated TransactionStatus = "initiated"
	StatusPending   TransactionStatus = "pending"
	StatusSuccess   TransactionStatus = "success"
	StatusFailed    TransactionStatus = "failed"
	StatusCancelled TransactionStatus = "cancelled"
	StatusExpired   TransactionStatus = "expired"
	StatusRefunded  TransactionStatus = "refunded"
	StatusDisputed  TransactionStatus = "disputed"
)

// NextActionType is the contract's NextActionType.
type NextActionType string

// The values of NextActionType.
const (
	NextActionRedirect NextActionType = "redirect"
	NextActionOTP      NextActionType = "otp"
	NextActionUSSD     NextActionType = "ussd"
)

// SplitItemStatus is the contract's SplitItemStatus.
type SplitItemStatus string

// The values of SplitItemStatus.
const (
	SplitPending  SplitItemStatus = "pending"
	SplitCredited SplitItemStatus = "credited"
)

// DisputeStatus is the contract's DisputeStatus.
type DisputeStatus string

// The values of DisputeStatus.
const (
	DisputeNeedsResponse DisputeStatus = "needs_response"
	DisputeUnderReview   DisputeStatus = "under_review"
	DisputeWon           DisputeStatus = "won"
	DisputeLost          DisputeStatus = "lost"
)

// PayoutRequestStatus is the contract's PayoutRequestStatus.
type PayoutRequestStatus string

// The values of PayoutRequestStatus.
const (
	PayoutRequestSubmitted PayoutRequestStatus = "submitted"
	PayoutRequestApproved  PayoutRequestStatus = "approved"
	PayoutRequestCompleted PayoutRequestStatus = "completed"
	PayoutRequestRejected  PayoutRequestStatus = "rejected"
	PayoutRequestFailed    PayoutRequestStatus = "failed"
)

// PayloadFormat is the contract's WebhookPayloadFormat.
type PayloadFormat string

// The values of PayloadFormat.
const (
	FormatLegacy   PayloadFormat = "legacy"
	Format20260601 PayloadFormat = "2026-06-01"
)

// DeliveryStatus is the contract's DeliveryStatus.
type DeliveryStatus string

// The values of DeliveryStatus.
const (
	DeliveryPending   DeliveryStatus = "pending"
	DeliverySucceeded DeliveryStatus = "succeeded"
	DeliveryFailed    DeliveryStatus = "failed"
)

// ErrorCode is the contract's ErrorCode.
type ErrorCode string

// The values of ErrorCode.
const (
	CodeMissingCredentials              ErrorCode = "missing_credentials"
	CodeInvalidAPIKey                   ErrorCode = "invalid_api_key"
	CodeUnauthorized                    ErrorCode = "unauthorized"
	CodeIPNotAllowed                    ErrorCode = "ip_not_allowed"
	CodeTestKeyInProduction             ErrorCode = "test_key_in_production"
	CodeScopeInsufficient               ErrorCode = "scope_insufficient"
	CodeLivemodeMismatch                ErrorCode = "livemode_mismatch"
	CodeForbidden                       ErrorCode = "forbidden"
	CodeIdempotencyKeyRequired          ErrorCode = "idempotency_key_required"
	CodeIdempotencyKeyTooLong           ErrorCode = "idempotency_key_too_long"
	CodeIdempotencyConflict             ErrorCode = "idempotency_conflict"
	CodeValidationError                 ErrorCode = "validation_error"
	CodeMerchantInactive                ErrorCode = "merchant_inactive"
	CodeMerchantKYCRequired             ErrorCode = "merchant_kyc_required"
	CodePayoutsDisabled                 ErrorCode = "payouts_disabled"
	CodeProviderUnavailable             ErrorCode = "provider_unavailable"
	CodeProviderCountryUnsupported      ErrorCode = "provider_country_unsupported"
	CodeProviderPayoutUnsupported       ErrorCode = "provider_payout_unsupported"
	CodeMerchantProviderNotAuthorized   ErrorCode = "merchant_provider_not_authorized"
	CodeAmountMustBePositive            ErrorCode = "amount_must_be_positive"
	CodeAmountBelowMerchantMinimum      ErrorCode = "amount_below_merchant_minimum"
	CodeAmountBelowProviderMinimum      ErrorCode = "amount_below_provider_minimum"
	CodeAmountAboveMerchantMaximum      ErrorCode = "amount_above_merchant_maximum"
	CodeDailyLimitExceeded              ErrorCode = "daily_limit_exceeded"
	CodeMerchantLimitExceeded           ErrorCode = "merchant_limit_exceeded"
	CodeBceaoLimitExceeded              ErrorCode = "bceao_limit_exceeded"
	CodeInvalidPhoneNumber              ErrorCode = "invalid_phone_number"
	CodeInsufficientBalance             ErrorCode = "insufficient_balance"
	CodeFeesUnavailable                 ErrorCode = "fees_unavailable"
	CodeTransactionNotFound             ErrorCode = "transaction_not_found"
	CodeTransactionNotRefundable        ErrorCode = "transaction_not_refundable"
	CodeNonPaymentTransactionRefund     ErrorCode = "non_payment_transaction_refund"
	CodeTransactionAlreadyFullyRefunded ErrorCode = "transaction_already_fully_refunded"
	CodeRefundExceedsRefundable         ErrorCode = "refund_exceeds_refundable"
	CodeRefundNotSupported              ErrorCode = "refund_not_supported"
	CodeSplitItemsRequired              ErrorCode = "split_items_required"
	CodeNonPaymentTransactionSplit      ErrorCode = "non_payment_transaction_split"
	CodeTransactionNotSplittable        ErrorCode = "transaction_not_splittable"
	CodeSplitTotalExceedsTransaction    ErrorCode = "split_total_exceeds_transaction"
	CodeSplitsExceedTransactionAmount   ErrorCode = "splits_exceed_transaction_amount"
	CodeBeneficiaryNotActive            ErrorCode = "beneficiary_not_active"
	CodeSubscriptionPlanNotAvailable    ErrorCode = "subscription_plan_not_available"
	CodeSubscriptionCustomerMismatch    ErrorCode = "subscription_customer_mismatch"
	CodeSubscriptionAlreadyInStatus     ErrorCode = "subscription_already_in_status"
	CodeDisputeNotRespondable           ErrorCode = "dispute_not_respondable"
	CodeInvalidSignature                ErrorCode = "invalid_signature"
	CodeDuplicate                       ErrorCode = "duplicate"
	CodeProviderUnavailableWebhook      ErrorCode = "provider_unavailable_webhook"
	CodeGatewayUnavailable              ErrorCode = "gateway_unavailable"
	CodeGatewayError                    ErrorCode = "gateway_error"
	CodeNotFound                        ErrorCode = "not_found"
	CodeMethodNotAllowed                ErrorCode = "method_not_allowed"
	CodeTooManyRequests                 ErrorCode = "too_many_requests"
	CodeServiceUnavailable              ErrorCode = "service_unavailable"
	CodeAPIError                        ErrorCode = "api_error"
	CodeInvalidRequest                  ErrorCode = "invalid_request"
	CodeRequestTooLarge                 ErrorCode = "request_too_large"
)
