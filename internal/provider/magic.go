package provider

import (
	"strings"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// Magic is the last four digits of a payer phone number that fix the
// outcome of a collection in the simulators and the emulator (and, of a
// recipient's number, the outcome of a payout).
type Magic string

// The magic suffixes (see the package documentation).
const (
	MagicSuccess     Magic = "0001" // settles success at once
	MagicFailed      Magic = "0002" // fails at once: insufficient_funds
	MagicCancelled   Magic = "0003" // cancelled at once: payer_cancelled
	MagicNoPayer     Magic = "0004" // stays pending forever
	MagicRefused     Magic = "0005" // the provider refuses: gateway_error
	MagicUnreachable Magic = "0006" // the provider is unreachable: gateway_unavailable
)

// Magics lists every magic suffix, in order.
var Magics = []Magic{MagicSuccess, MagicFailed, MagicCancelled, MagicNoPayer, MagicRefused, MagicUnreachable}

// Senegalese examples of the magic numbers, valid E.164 mobile numbers.
const (
	TestPhoneSuccess     = "+221770000001"
	TestPhoneFailed      = "+221770000002"
	TestPhoneCancelled   = "+221770000003"
	TestPhoneNoPayer     = "+221770000004"
	TestPhoneRefused     = "+221770000005"
	TestPhoneUnreachable = "+221770000006"
	// TestPhonePending is an ordinary number: pending until the payer acts.
	TestPhonePending = "+221771234567"
)

// TestOTP is the one-time code OTP providers accept in test mode and in
// the emulator.
const TestOTP = "123456"

// Reasons the simulators and the emulator give.
const (
	ReasonInsufficientFunds  = "insufficient_funds"
	ReasonPayerCancelled     = "payer_cancelled"
	ReasonPayerDeclined      = "payer_declined"
	ReasonWrongOTP           = "wrong_otp"
	ReasonTooManyWrongOTP    = "too_many_wrong_codes"
	ReasonNoPayer            = "no_payer"
	ReasonUnknownToSimulator = "unknown_to_simulator"
)

// MaxOTPAttempts is how many wrong codes fail a collection.
const MaxOTPAttempts = 3

// MagicOf returns the magic suffix of a phone number, or "" when the
// number is an ordinary one. Only digits count, so "+221 77 000 00 01"
// is MagicSuccess too.
func MagicOf(phone string) Magic {
	var d [4]byte
	n := 0
	for i := len(phone) - 1; i >= 0 && n < 4; i-- {
		if c := phone[i]; c >= '0' && c <= '9' {
			n++
			d[4-n] = c
		}
	}
	if n < 4 {
		return ""
	}
	m := Magic(d[:])
	for _, k := range Magics {
		if k == m {
			return m
		}
	}
	return ""
}

// mobilePrefix is, per country, the calling code and a national mobile
// number pattern whose last four digits are replaced by the magic suffix.
var mobilePrefix = map[xaalis.Country]string{
	"SN": "+221770000000",
	"CI": "+2250700000000",
	"ML": "+22370000000",
	"BF": "+22670000000",
	"TG": "+22890000000",
	"BJ": "+2290190000000",
	"NE": "+22790000000",
	"GW": "+245955000000",
}

// TestPhone returns a valid E.164 mobile number of the country whose
// last four digits are m; "" for a country outside UEMOA.
func TestPhone(c xaalis.Country, m Magic) string {
	p, ok := mobilePrefix[c]
	if !ok || len(m) != 4 {
		return ""
	}
	return strings.TrimSuffix(p, "0000") + string(m)
}
