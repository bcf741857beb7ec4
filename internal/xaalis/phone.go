package xaalis

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/nyaruka/phonenumbers"
)

// The reasons an invalid_phone_number error carries in its context under
// "reason". Clients branch on them: they never change once published.
const (
	// PhoneReasonEmpty: the number is blank.
	PhoneReasonEmpty = "empty"
	// PhoneReasonNotANumber: the input holds something other than digits,
	// spaces, dots, dashes, parentheses and one leading "+", or no digit.
	PhoneReasonNotANumber = "not_a_number"
	// PhoneReasonTooShort: too few digits for the country.
	PhoneReasonTooShort = "too_short"
	// PhoneReasonTooLong: too many digits for the country.
	PhoneReasonTooLong = "too_long"
	// PhoneReasonWrongCountry: the number carries another country's calling
	// code; the context also has "country" (the number's region) and
	// "expected_country".
	PhoneReasonWrongCountry = "wrong_country"
	// PhoneReasonOldNumberingPlan: an 8-digit Benin or Côte d'Ivoire number
	// of the plan these countries left; the context has "suggestion", the
	// number in the new plan, when it can be computed.
	PhoneReasonOldNumberingPlan = "old_numbering_plan"
	// PhoneReasonNotMobile: a valid number that is not a mobile one (a
	// fixed line, toll-free, VoIP...): mobile money needs a mobile number.
	PhoneReasonNotMobile = "not_mobile"
	// PhoneReasonInvalid: any other number that is not valid in the country.
	PhoneReasonInvalid = "invalid"
	// PhoneReasonUnsupportedCountry: the target country is not one of
	// Countries.
	PhoneReasonUnsupportedCountry = "unsupported_country"
)

// PhoneReasons lists every reason ParsePhone may give, for documentation.
var PhoneReasons = []string{
	PhoneReasonEmpty, PhoneReasonNotANumber, PhoneReasonTooShort, PhoneReasonTooLong,
	PhoneReasonWrongCountry, PhoneReasonOldNumberingPlan, PhoneReasonNotMobile,
	PhoneReasonInvalid, PhoneReasonUnsupportedCountry,
}

// countryNames are the English names used in messages.
var countryNames = map[string]string{
	"SN": "Senegal", "CI": "Côte d'Ivoire", "ML": "Mali", "BF": "Burkina Faso",
	"TG": "Togo", "BJ": "Benin", "NE": "Niger", "GW": "Guinea-Bissau",
}

// maxPhoneDigits bounds the digits of any input: 15 for E.164 plus the
// two of a "00" prefix. Longer input is refused before the parser runs.
const maxPhoneDigits = 17

// ParsePhone normalises a payer or recipient phone number for a target country to E.164.
// It accepts E.164 ("+221771234567"), international with 00 ("00221771234567"), and national
// forms ("77 123 45 67", "771234567", with spaces, dots, dashes or parentheses). It returns
// *Error invalid_phone_number with context {"reason": "..."} when the number is not a valid
// mobile number of that country; the reasons are the PhoneReason constants.
//
// Benin (since 30 November 2024) and Côte d'Ivoire (since 31 January 2021)
// have 10-digit numbers: an 8-digit number of their old plan is refused
// with reason old_numbering_plan and, when it can be computed, the number
// in the new plan as "suggestion".
func ParsePhone(raw string, country Country) (string, error) {
	if !country.Valid() {
		return "", phoneError(PhoneReasonUnsupportedCountry,
			fmt.Sprintf("The country %q is not one of the UEMOA countries Xaalis serves.", string(country)),
			"expected_country", string(country))
	}
	region := string(country)
	name := countryNames[region]
	cc := phonenumbers.GetCountryCodeForRegion(region)

	if strings.TrimSpace(raw) == "" {
		return "", phoneError(PhoneReasonEmpty, "The phone number is empty.")
	}
	clean, digits, ok := cleanPhone(raw)
	if !ok || digits == 0 {
		return "", phoneError(PhoneReasonNotANumber,
			"The phone number may contain only digits, spaces, dots, dashes, parentheses and a leading +.")
	}
	key := region + clean
	if e164, ok := accepted.get(key); ok {
		return e164, nil
	}
	// Built only when refused: a valid number, the common case, pays
	// for none of these messages.
	tooShort := func() error {
		return phoneError(PhoneReasonTooShort, fmt.Sprintf("The phone number is too short for %s (+%d).", name, cc))
	}
	tooLong := func() error {
		return phoneError(PhoneReasonTooLong, fmt.Sprintf("The phone number is too long for %s (+%d).", name, cc))
	}
	invalid := func() error {
		return phoneError(PhoneReasonInvalid, fmt.Sprintf("The phone number is not a valid number of %s (+%d).", name, cc))
	}
	if digits > maxPhoneDigits {
		return "", tooLong()
	}

	num, err := phonenumbers.Parse(clean, region)
	if err != nil {
		switch {
		case errors.Is(err, phonenumbers.ErrTooShortNSN), errors.Is(err, phonenumbers.ErrTooShortAfterIDD):
			return "", tooShort()
		case errors.Is(err, phonenumbers.ErrNumTooLong):
			return "", tooLong()
		case errors.Is(err, phonenumbers.ErrNotANumber) && digits < 2:
			// The parser wants two digits before it sees a number at all.
			return "", tooShort()
		case errors.Is(err, phonenumbers.ErrNotANumber):
			return "", phoneError(PhoneReasonNotANumber, "The phone number is not a number.")
		default: // ErrInvalidCountryCode and anything newer
			return "", invalid()
		}
	}

	if int(num.GetCountryCode()) != cc {
		other := phonenumbers.GetRegionCodeForNumber(num)
		if other == "" || other == "ZZ" {
			other = phonenumbers.GetRegionCodeForCountryCode(int(num.GetCountryCode()))
		}
		otherName := countryNames[other]
		if otherName == "" {
			otherName = other
		}
		e := phoneError(PhoneReasonWrongCountry,
			fmt.Sprintf("The phone number belongs to %s (+%d), not %s (+%d).", otherName, num.GetCountryCode(), name, cc),
			"country", other, "expected_country", region)
		return "", e
	}

	nsn := phonenumbers.GetNationalSignificantNumber(num)
	if e := oldNumberingPlan(region, nsn, num); e != nil {
		return "", e
	}

	switch phonenumbers.IsPossibleNumberWithReason(num) {
	case phonenumbers.TOO_SHORT:
		return "", tooShort()
	case phonenumbers.TOO_LONG:
		return "", tooLong()
	}
	if !phonenumbers.IsValidNumberForRegion(num, region) {
		return "", invalid()
	}
	switch t := phonenumbers.GetNumberType(num); t {
	case phonenumbers.MOBILE, phonenumbers.FIXED_LINE_OR_MOBILE:
	default:
		return "", phoneError(PhoneReasonNotMobile,
			fmt.Sprintf("The phone number is %s: mobile money needs a mobile number.", lineTypeName(t)))
	}
	e164 := phonenumbers.Format(num, phonenumbers.E164)
	accepted.put(key, e164)
	return e164, nil
}

// accepted remembers the numbers ParsePhone accepted, by country and
// cleaned input: payers come back, and phonenumbers.Parse's regular
// expressions cost about 15 µs and 87 allocations a number, on every
// payment and payout. Only accepted numbers are kept, since a refusal's
// error is built afresh for its caller. ParsePhone depends on nothing
// but its input and the library's compiled-in metadata, so an entry
// never goes stale.
var accepted = phoneCache{max: 8192}

// phoneCache is a bounded map: when full, it starts over, so that a flood
// of new numbers holds at most max entries.
type phoneCache struct {
	mu  sync.RWMutex
	m   map[string]string
	max int
}

func (c *phoneCache) get(key string) (string, bool) {
	c.mu.RLock()
	v, ok := c.m[key]
	c.mu.RUnlock()
	return v, ok
}

func (c *phoneCache) put(key, e164 string) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[string]string, min(c.max, 1024))
	}
	c.m[key] = e164
	c.mu.Unlock()
}

// phoneError builds the invalid_phone_number error of a reason.
func phoneError(reason, msg string, kv ...any) *Error {
	e := E(EInvalidPhoneNumber, append([]any{"reason", reason}, kv...)...)
	e.Message = msg
	return e
}

// cleanPhone keeps the digits of raw and its leading "+", if any. It
// fails on any character but digits, white space, '.', '-', '(' and ')',
// and on a '+' that is not before every digit or comes twice. Letters are
// refused rather than read as a keypad's digits.
func cleanPhone(raw string) (clean string, digits int, ok bool) {
	var b strings.Builder
	b.Grow(len(raw))
	plus := false
	for _, r := range raw {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
			digits++
		case r == '+':
			if plus || digits > 0 {
				return "", 0, false
			}
			plus = true
		case r == '.', r == '-', r == '(', r == ')', unicode.IsSpace(r):
		default:
			return "", 0, false
		}
	}
	if plus {
		return "+" + b.String(), digits, true
	}
	return b.String(), digits, true
}

// oldNumberingPlan returns the old_numbering_plan error of an 8-digit
// national number nsn of Benin or Côte d'Ivoire, or nil.
//
// Benin (ARCEP Bénin, 30 November 2024): every number gained the prefix
// "01" whatever its operator; 8-digit numbers still valid in the new plan
// (81… and 857[58]… service numbers) are left alone, and so are 8-digit
// numbers starting with 0, which the old plan never had (a new number
// missing two digits, more likely).
//
// Côte d'Ivoire (ARTCI, 31 January 2021): mobiles gained the prefix of
// their operator, 01 Moov, 05 MTN, 07 Orange; fixed lines 21 Moov, 25 MTN,
// 27 Orange. The operator follows from the old number's blocks: see
// ciNewPrefix.
//
// The suggestion is given only when the computed number is valid in the
// new plan.
func oldNumberingPlan(region, nsn string, num *phonenumbers.PhoneNumber) *Error {
	if len(nsn) != 8 {
		return nil
	}
	var prefix, msg string
	switch region {
	case "BJ":
		if nsn[0] == '0' || phonenumbers.IsValidNumberForRegion(num, region) {
			return nil
		}
		prefix, msg = "01", "Benin numbers have 10 digits since 30 November 2024"
	case "CI":
		prefix, msg = ciNewPrefix(nsn), "Côte d'Ivoire numbers have 10 digits since 31 January 2021"
	default:
		return nil
	}
	cc := strconv.Itoa(int(num.GetCountryCode()))
	old := "+" + cc + " " + pairs(nsn)
	if prefix != "" {
		if n, err := phonenumbers.Parse("+"+cc+prefix+nsn, region); err == nil && phonenumbers.IsValidNumberForRegion(n, region) {
			return phoneError(PhoneReasonOldNumberingPlan,
				fmt.Sprintf("%s: %s is now +%s %s %s.", msg, old, cc, prefix, pairs(nsn)),
				"suggestion", phonenumbers.Format(n, phonenumbers.E164))
		}
	}
	return phoneError(PhoneReasonOldNumberingPlan, fmt.Sprintf("%s: %s is a number of the old 8-digit plan.", msg, old))
}

// ciNewPrefix is the prefix an old 8-digit Ivorian number gained on 31
// January 2021, or "" when none is known. ARTCI gave the prefix per
// operator; the old blocks of each operator follow a pattern, used by
// the migration tools of the time:
//   - mobiles (old first digit 0, 4-9): the second digit tells the
//     operator: 0-3 Moov (01), 4-6 MTN (05), 7-9 Orange (07); so
//     07 12 34 56 became 07 07 12 34 56 and 05 12 34 56 became
//     05 05 12 34 56;
//   - fixed lines (old first digit 2 or 3): the third digit tells it:
//     0 MTN (25), 8 Moov (21, Abidjan's 2x8 blocks), else Orange (27).
//
// Ported numbers, which kept their old operator's block, get the prefix
// of that block: the prefix follows the number, not the subscriber's
// current operator.
func ciNewPrefix(nsn string) string {
	switch nsn[0] {
	case '2', '3':
		switch {
		case nsn[2] == '0':
			return "25"
		case nsn[0] == '2' && nsn[2] == '8':
			return "21"
		default:
			return "27"
		}
	case '0', '4', '5', '6', '7', '8', '9':
		switch nsn[1] {
		case '0', '1', '2', '3':
			return "01"
		case '4', '5', '6':
			return "05"
		default:
			return "07"
		}
	}
	return ""
}

// pairs writes digits in groups of two: "97123456" is "97 12 34 56".
func pairs(digits string) string {
	var b strings.Builder
	for i := 0; i < len(digits); i += 2 {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(digits[i:min(i+2, len(digits))])
	}
	return b.String()
}

// lineTypeName names a non-mobile number type for messages.
func lineTypeName(t phonenumbers.PhoneNumberType) string {
	switch t {
	case phonenumbers.FIXED_LINE:
		return "a fixed line"
	case phonenumbers.TOLL_FREE:
		return "a toll-free number"
	case phonenumbers.PREMIUM_RATE:
		return "a premium-rate number"
	case phonenumbers.SHARED_COST:
		return "a shared-cost number"
	case phonenumbers.VOIP:
		return "a VoIP number"
	case phonenumbers.PERSONAL_NUMBER:
		return "a personal number"
	case phonenumbers.PAGER:
		return "a pager number"
	case phonenumbers.UAN:
		return "a service number"
	case phonenumbers.VOICEMAIL:
		return "a voicemail number"
	}
	return "not a mobile number"
}

// MaskPhone hides the middle of an E.164 number for logs and receipts:
// it keeps the country code, the first two and the last two digits of the
// national number, in the country's international grouping:
// "+221771234567" is "+221 77 *** ** 67". Input that is not E.164 keeps
// only its last two digits: "77123" is "***23". It never returns more
// digits than those.
func MaskPhone(e164 string) string {
	if num, err := phonenumbers.Parse(e164, "ZZ"); err == nil && strings.HasPrefix(strings.TrimSpace(e164), "+") {
		num.Extension = nil
		nsn := phonenumbers.GetNationalSignificantNumber(num)
		intl := phonenumbers.Format(num, phonenumbers.INTERNATIONAL)
		prefix := "+" + strconv.Itoa(int(num.GetCountryCode()))
		if rest, ok := strings.CutPrefix(intl, prefix); ok && len(nsn) > 0 && digitCount(rest) == len(nsn) {
			keepHead := 2
			if len(nsn) < 6 {
				keepHead = 0
			}
			return prefix + maskDigits(rest, keepHead, 2)
		}
	}
	return maskDigits(e164, 0, 2)
}

// digitCount counts the ASCII digits of s.
func digitCount(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			n++
		}
	}
	return n
}

// maskDigits replaces by '*' every ASCII digit of s but the first head and
// the last tail ones; other characters stay.
func maskDigits(s string, head, tail int) string {
	total := digitCount(s)
	b := []byte(s)
	seen := 0
	for i := range b {
		if b[i] < '0' || b[i] > '9' {
			continue
		}
		if seen >= head && seen < total-tail {
			b[i] = '*'
		}
		seen++
	}
	return string(b)
}

// PhoneCountry is the UEMOA country of an E.164 number (ParsePhone's), or
// "" for none: its calling code's region, as ParsePhone reads it.
func PhoneCountry(e164 string) Country {
	num, err := phonenumbers.Parse(e164, "")
	if err != nil {
		return ""
	}
	if c := Country(phonenumbers.GetRegionCodeForCountryCode(int(num.GetCountryCode()))); c.Valid() {
		return c
	}
	return ""
}
