package xaalis_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"

	"github.com/xaalis/xaalis/internal/xaalis"
)

func TestParsePhone(t *testing.T) {
	type ctx = map[string]any
	tests := []struct {
		name    string
		raw     string
		country xaalis.Country
		want    string // E.164 when accepted
		reason  string // when refused
		context ctx    // more context the error must carry
		message string // exact message, when it matters
	}{
		// One mobile number of every country, national and E.164.
		{name: "OK/SN_national", raw: "77 123 45 67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_e164", raw: "+221771234567", country: "SN", want: "+221771234567"},
		{name: "OK/SN_national_70", raw: "701234567", country: "SN", want: "+221701234567"},
		{name: "OK/CI_national", raw: "07 07 12 34 56", country: "CI", want: "+2250707123456"},
		{name: "OK/CI_e164", raw: "+2250707123456", country: "CI", want: "+2250707123456"},
		{name: "OK/CI_national_MTN", raw: "05 05 12 34 56", country: "CI", want: "+2250505123456"},
		{name: "OK/CI_national_Moov", raw: "01 23 45 67 89", country: "CI", want: "+2250123456789"},
		{name: "OK/ML_national", raw: "76 12 34 56", country: "ML", want: "+22376123456"},
		{name: "OK/ML_e164", raw: "+22365012345", country: "ML", want: "+22365012345"},
		{name: "OK/BF_national", raw: "70 12 34 56", country: "BF", want: "+22670123456"},
		{name: "OK/BF_e164", raw: "+22670123456", country: "BF", want: "+22670123456"},
		{name: "OK/TG_national", raw: "90 11 23 45", country: "TG", want: "+22890112345"},
		{name: "OK/TG_e164", raw: "+22890112345", country: "TG", want: "+22890112345"},
		{name: "OK/BJ_national", raw: "01 97 12 34 56", country: "BJ", want: "+2290197123456"},
		{name: "OK/BJ_e164", raw: "+2290197123456", country: "BJ", want: "+2290197123456"},
		{name: "OK/NE_national", raw: "93 12 34 56", country: "NE", want: "+22793123456"},
		{name: "OK/NE_e164", raw: "+22793123456", country: "NE", want: "+22793123456"},
		{name: "OK/GW_national", raw: "955 012 345", country: "GW", want: "+245955012345"},
		{name: "OK/GW_e164", raw: "+245955012345", country: "GW", want: "+245955012345"},

		// Accepted spellings.
		{name: "OK/SN_spaces", raw: "  77 123 45 67  ", country: "SN", want: "+221771234567"},
		{name: "OK/SN_dashes", raw: "77-123-45-67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_dots", raw: "77.123.45.67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_parentheses", raw: "(+221) 77 123-45.67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_00_prefix", raw: "00221771234567", country: "SN", want: "+221771234567"},
		{name: "OK/SN_00_prefix_spaced", raw: "00 221 77 123 45 67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_e164_spaced", raw: "+221 77 123 45 67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_country_code_without_plus", raw: "221 77 123 45 67", country: "SN", want: "+221771234567"},
		{name: "OK/SN_no_break_space", raw: "77\u00a0123\u00a045\u00a067", country: "SN", want: "+221771234567"},
		{name: "OK/BJ_00_prefix", raw: "00229 01 97 12 34 56", country: "BJ", want: "+2290197123456"},
		{name: "OK/CI_dashes", raw: "07-07-12-34-56", country: "CI", want: "+2250707123456"},

		// Magic test numbers used by other tests: 77 000 00 0N.
		{name: "OK/SN_magic_1", raw: "77 000 00 01", country: "SN", want: "+221770000001"},
		{name: "OK/SN_magic_2", raw: "77 000 00 02", country: "SN", want: "+221770000002"},
		{name: "OK/SN_magic_3", raw: "77 000 00 03", country: "SN", want: "+221770000003"},
		{name: "OK/SN_magic_4", raw: "77 000 00 04", country: "SN", want: "+221770000004"},
		{name: "OK/SN_magic_5", raw: "77 000 00 05", country: "SN", want: "+221770000005"},
		{name: "OK/SN_magic_6", raw: "77 000 00 06", country: "SN", want: "+221770000006"},
		{name: "OK/SN_magic_e164", raw: "+221770000001", country: "SN", want: "+221770000001"},

		{name: "ErrInvalidPhoneNumber/empty", raw: "", country: "SN", reason: "empty"},
		{name: "ErrInvalidPhoneNumber/blank", raw: " \t ", country: "SN", reason: "empty"},
		{name: "ErrInvalidPhoneNumber/not_a_number", raw: "abc", country: "SN", reason: "not_a_number"},
		{name: "ErrInvalidPhoneNumber/not_a_number_letters_inside", raw: "77 ABC 45 67", country: "SN", reason: "not_a_number"},
		{name: "ErrInvalidPhoneNumber/not_a_number_extension", raw: "771234567 ext 12", country: "SN", reason: "not_a_number"},
		{name: "ErrInvalidPhoneNumber/not_a_number_plus_only", raw: "+", country: "SN", reason: "not_a_number"},
		{name: "ErrInvalidPhoneNumber/not_a_number_two_plus", raw: "++221771234567", country: "SN", reason: "not_a_number"},
		{name: "ErrInvalidPhoneNumber/not_a_number_plus_inside", raw: "221+771234567", country: "SN", reason: "not_a_number"},
		{name: "ErrInvalidPhoneNumber/too_short", raw: "77 12", country: "SN", reason: "too_short"},
		{name: "ErrInvalidPhoneNumber/too_short_one_digit", raw: "7", country: "SN", reason: "too_short"},
		{name: "ErrInvalidPhoneNumber/too_short_country_code_only", raw: "+221", country: "SN", reason: "too_short"},
		{name: "ErrInvalidPhoneNumber/too_short_CI_9_digits", raw: "07 07 12 34 5", country: "CI", reason: "too_short"},
		{name: "ErrInvalidPhoneNumber/too_long", raw: "77 123 45 67 8", country: "SN", reason: "too_long"},
		{name: "ErrInvalidPhoneNumber/too_long_trunk_zero", raw: "077 123 45 67", country: "SN", reason: "too_long"},
		{name: "ErrInvalidPhoneNumber/too_long_many_digits", raw: "+221 77 123 45 67 89 00 11 22 33", country: "SN", reason: "too_long"},
		{name: "ErrInvalidPhoneNumber/wrong_country", raw: "+225 07 07 12 34 56", country: "SN", reason: "wrong_country",
			context: ctx{"country": "CI", "expected_country": "SN"},
			message: "The phone number belongs to Côte d'Ivoire (+225), not Senegal (+221)."},
		{name: "ErrInvalidPhoneNumber/wrong_country_00", raw: "00221 77 123 45 67", country: "ML", reason: "wrong_country",
			context: ctx{"country": "SN", "expected_country": "ML"}},
		{name: "ErrInvalidPhoneNumber/wrong_country_outside_UEMOA", raw: "+33 6 12 34 56 78", country: "SN", reason: "wrong_country",
			context: ctx{"country": "FR", "expected_country": "SN"}},
		{name: "ErrInvalidPhoneNumber/not_mobile_SN_fixed", raw: "+221 33 823 45 67", country: "SN", reason: "not_mobile",
			message: "The phone number is a fixed line: mobile money needs a mobile number."},
		{name: "ErrInvalidPhoneNumber/not_mobile_SN_fixed_national", raw: "33 823 45 67", country: "SN", reason: "not_mobile"},
		{name: "ErrInvalidPhoneNumber/not_mobile_SN_toll_free", raw: "800 123 456", country: "SN", reason: "not_mobile"},
		{name: "ErrInvalidPhoneNumber/not_mobile_CI_fixed", raw: "21 23 45 67 89", country: "CI", reason: "not_mobile"},
		{name: "ErrInvalidPhoneNumber/not_mobile_BJ_fixed", raw: "01 20 21 12 34", country: "BJ", reason: "not_mobile"},
		{name: "ErrInvalidPhoneNumber/not_mobile_BJ_8_digit_service", raw: "81 12 34 56", country: "BJ", reason: "not_mobile"},
		{name: "ErrInvalidPhoneNumber/not_mobile_GW_fixed", raw: "443 201 234", country: "GW", reason: "not_mobile"},
		{name: "ErrInvalidPhoneNumber/invalid", raw: "99 123 45 67", country: "SN", reason: "invalid"},
		{name: "ErrInvalidPhoneNumber/invalid_GW_8_digits", raw: "9550 1234", country: "GW", reason: "invalid"},
		{name: "ErrInvalidPhoneNumber/invalid_BJ_8_digits_from_0", raw: "01 97 12 34", country: "BJ", reason: "invalid"},
		{name: "ErrInvalidPhoneNumber/invalid_unknown_calling_code", raw: "+999 123 456 789", country: "SN", reason: "invalid"},
		{name: "ErrInvalidPhoneNumber/unsupported_country", raw: "+33612345678", country: "FR", reason: "unsupported_country"},
		{name: "ErrInvalidPhoneNumber/unsupported_country_empty", raw: "771234567", country: "", reason: "unsupported_country"},
		{name: "ErrInvalidPhoneNumber/unsupported_country_lower_case", raw: "771234567", country: "sn", reason: "unsupported_country"},

		// Benin: every number gained "01" on 30 November 2024.
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_BJ", raw: "97 12 34 56", country: "BJ", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2290197123456"},
			message: "Benin numbers have 10 digits since 30 November 2024: +229 97 12 34 56 is now +229 01 97 12 34 56."},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_BJ_e164", raw: "+22997123456", country: "BJ", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2290197123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_BJ_00", raw: "00229 66 12 34 56", country: "BJ", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2290166123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_BJ_fixed", raw: "20 21 12 34", country: "BJ", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2290120211234"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_BJ_no_suggestion", raw: "31 12 34 56", country: "BJ", reason: "old_numbering_plan",
			context: ctx{"suggestion": nil},
			message: "Benin numbers have 10 digits since 30 November 2024: +229 31 12 34 56 is a number of the old 8-digit plan."},

		// Côte d'Ivoire: the operator's prefix on 31 January 2021.
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_Orange", raw: "07 12 34 56", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2250707123456"},
			message: "Côte d'Ivoire numbers have 10 digits since 31 January 2021: +225 07 12 34 56 is now +225 07 07 12 34 56."},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_Orange_4x", raw: "+225 48 12 34 56", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2250748123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_MTN", raw: "05 12 34 56", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2250505123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_MTN_6x", raw: "+22566123456", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2250566123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_Moov", raw: "02 12 34 56", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2250102123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_Moov_4x", raw: "00225 40 12 34 56", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2250140123456"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_fixed_Orange", raw: "20 21 23 45", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2252720212345"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_fixed_MTN", raw: "20 01 23 45", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2252520012345"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_fixed_Moov", raw: "20 81 23 45", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": "+2252120812345"}},
		{name: "ErrInvalidPhoneNumber/old_numbering_plan_CI_no_suggestion", raw: "12 34 56 78", country: "CI", reason: "old_numbering_plan",
			context: ctx{"suggestion": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := xaalis.ParsePhone(tt.raw, tt.country)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("ParsePhone(%q, %s) = %v", tt.raw, tt.country, err)
				}
				if got != tt.want {
					t.Fatalf("ParsePhone(%q, %s) = %q, want %q", tt.raw, tt.country, got, tt.want)
				}
				// Again, from the cache of accepted numbers.
				if again, err := xaalis.ParsePhone(tt.raw, tt.country); again != tt.want || err != nil {
					t.Fatalf("ParsePhone(%q, %s) the second time = %q, %v", tt.raw, tt.country, again, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParsePhone(%q, %s) = %q, want reason %s", tt.raw, tt.country, got, tt.reason)
			}
			if got != "" {
				t.Errorf("ParsePhone(%q, %s) returned %q with its error", tt.raw, tt.country, got)
			}
			var e *xaalis.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is no *xaalis.Error", err, err)
			}
			if e.Code != xaalis.EInvalidPhoneNumber || e.Status() != 422 {
				t.Fatalf("code %s status %d, want invalid_phone_number 422", e.Code, e.Status())
			}
			if r := e.Context["reason"]; r != tt.reason {
				t.Fatalf("reason %v, want %s (%v)", r, tt.reason, err)
			}
			for k, v := range tt.context {
				if gotV, ok := e.Context[k]; v == nil && ok {
					t.Errorf("context %s = %v, want none", k, gotV)
				} else if v != nil && gotV != v {
					t.Errorf("context %s = %v, want %v", k, gotV, v)
				}
			}
			if e.Message == "" {
				t.Error("no message")
			}
			if tt.message != "" && e.Message != tt.message {
				t.Errorf("message\n got %q\nwant %q", e.Message, tt.message)
			}
			if s, ok := e.Context["suggestion"].(string); ok {
				// A suggestion is itself accepted, or refused only for not
				// being a mobile number.
				_, err := xaalis.ParsePhone(s, tt.country)
				var se *xaalis.Error
				if err != nil && (!errors.As(err, &se) || se.Context["reason"] != xaalis.PhoneReasonNotMobile) {
					t.Errorf("suggestion %s refused: %v", s, err)
				}
			}
		})
	}
}

// TestParsePhoneReasons checks that the constants have their published
// values and that every reason has a case above.
func TestParsePhoneReasons(t *testing.T) {
	want := map[string]string{
		xaalis.PhoneReasonEmpty: "empty", xaalis.PhoneReasonNotANumber: "not_a_number",
		xaalis.PhoneReasonTooShort: "too_short", xaalis.PhoneReasonTooLong: "too_long",
		xaalis.PhoneReasonWrongCountry: "wrong_country", xaalis.PhoneReasonOldNumberingPlan: "old_numbering_plan",
		xaalis.PhoneReasonNotMobile: "not_mobile", xaalis.PhoneReasonInvalid: "invalid",
		xaalis.PhoneReasonUnsupportedCountry: "unsupported_country",
	}
	for k, v := range want {
		if k != v {
			t.Errorf("reason constant %q, want %q", k, v)
		}
	}
	if len(xaalis.PhoneReasons) != len(want) {
		t.Errorf("PhoneReasons has %d entries, want %d", len(xaalis.PhoneReasons), len(want))
	}
	for _, r := range xaalis.PhoneReasons {
		if _, ok := want[r]; !ok {
			t.Errorf("unexpected reason %q", r)
		}
	}
}

// TestParsePhoneExamples accepts the library's own example mobile of every
// country, in E.164 and national forms, and refuses its example fixed line.
func TestParsePhoneExamples(t *testing.T) {
	for _, c := range xaalis.Countries {
		region := string(c)
		mobile := phonenumbers.GetExampleNumberForType(region, phonenumbers.MOBILE)
		if mobile == nil {
			t.Fatalf("%s: no example mobile", region)
		}
		e164 := phonenumbers.Format(mobile, phonenumbers.E164)
		for _, raw := range []string{e164, phonenumbers.Format(mobile, phonenumbers.NATIONAL), phonenumbers.Format(mobile, phonenumbers.INTERNATIONAL)} {
			if got, err := xaalis.ParsePhone(raw, c); err != nil || got != e164 {
				t.Errorf("%s: ParsePhone(%q) = %q, %v; want %s", region, raw, got, err, e164)
			}
		}
		fixed := phonenumbers.GetExampleNumberForType(region, phonenumbers.FIXED_LINE)
		if fixed == nil {
			continue
		}
		_, err := xaalis.ParsePhone(phonenumbers.Format(fixed, phonenumbers.E164), c)
		var e *xaalis.Error
		if !errors.As(err, &e) || e.Context["reason"] != xaalis.PhoneReasonNotMobile {
			t.Errorf("%s: fixed line %s: %v, want not_mobile", region, phonenumbers.Format(fixed, phonenumbers.E164), err)
		}
	}
}

func TestMaskPhone(t *testing.T) {
	tests := []struct{ in, want string }{
		{"+221771234567", "+221 77 *** ** 67"},
		{"+221770000001", "+221 77 *** ** 01"},
		{"+2290197123456", "+229 01 ** ** ** 56"},
		{"+22370123456", "+223 70 ** ** 56"},
		{"+245955012345", "+245 95* *** *45"},
		{"+2250707123456", "+225 07 ** ** **56"},
		{"771234567", "*******67"},
		{"", ""},
		{"+1", "+1"},
	}
	for _, tt := range tests {
		if got := xaalis.MaskPhone(tt.in); got != tt.want {
			t.Errorf("MaskPhone(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	// Every accepted number keeps at most its country code and four
	// national digits visible.
	for _, c := range xaalis.Countries {
		n := phonenumbers.GetExampleNumberForType(string(c), phonenumbers.MOBILE)
		e164 := phonenumbers.Format(n, phonenumbers.E164)
		m := xaalis.MaskPhone(e164)
		cc := "+" + strconv.Itoa(int(n.GetCountryCode())) + " "
		if !strings.HasPrefix(m, cc) {
			t.Errorf("MaskPhone(%s) = %q: no %q", e164, m, cc)
			continue
		}
		visible := 0
		for _, r := range strings.TrimPrefix(m, cc) {
			if r >= '0' && r <= '9' {
				visible++
			}
		}
		if visible != 4 {
			t.Errorf("MaskPhone(%s) = %q shows %d national digits, want 4", e164, m, visible)
		}
	}
}

func FuzzParsePhone(f *testing.F) {
	for _, s := range []string{
		"77 123 45 67", "+221771234567", "00221771234567", "(+221) 77-123.45.67", "221771234567",
		"97 12 34 56", "+22997123456", "07 12 34 56", "+2250707123456", "955 012 345", "+33612345678",
		"", " ", "+", "++1", "abc", "77 ABC 45 67", "0", "00", "+0", "+00221771234567", "1", "81 12 34 56",
		"\u00a0+225 \u0660\u0661", "+221 77 123 45 67 89 00 11 22 33", "012345678901234567890",
	} {
		for i := range xaalis.Countries {
			f.Add(s, uint8(i))
		}
	}
	f.Add("771234567", uint8(200))
	reasons := xaalis.PhoneReasons
	f.Fuzz(func(t *testing.T, raw string, ci uint8) {
		country := xaalis.Country("FR")
		if int(ci) < len(xaalis.Countries) {
			country = xaalis.Countries[ci]
		}
		got, err := xaalis.ParsePhone(raw, country)
		if err != nil {
			var e *xaalis.Error
			if !errors.As(err, &e) || e.Code != xaalis.EInvalidPhoneNumber {
				t.Fatalf("ParsePhone(%q, %s): %v is not invalid_phone_number", raw, country, err)
			}
			r, _ := e.Context["reason"].(string)
			if !slices.Contains(reasons, r) {
				t.Fatalf("ParsePhone(%q, %s): unknown reason %q", raw, country, r)
			}
			if got != "" {
				t.Fatalf("ParsePhone(%q, %s) = %q with error %v", raw, country, got, err)
			}
			return
		}
		cc := "+" + strconv.Itoa(phonenumbers.GetCountryCodeForRegion(string(country)))
		if !strings.HasPrefix(got, cc) {
			t.Fatalf("ParsePhone(%q, %s) = %q, want prefix %s", raw, country, got, cc)
		}
		for _, r := range got[1:] {
			if r < '0' || r > '9' {
				t.Fatalf("ParsePhone(%q, %s) = %q: not E.164", raw, country, got)
			}
		}
		again, err := xaalis.ParsePhone(got, country)
		if err != nil || again != got {
			t.Fatalf("ParsePhone(%q, %s) = %q, but again: %q, %v", raw, country, got, again, err)
		}
		if m := xaalis.MaskPhone(got); !strings.HasPrefix(m, cc+" ") || !strings.HasSuffix(m, got[len(got)-2:]) {
			t.Fatalf("MaskPhone(%q) = %q", got, m)
		}
	})
}

// BenchmarkParsePhoneNew parses numbers never seen, each through
// phonenumbers.Parse: what a payer's first payment costs.
func BenchmarkParsePhoneNew(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := xaalis.ParsePhone(fmt.Sprintf("+22177%07d", i%10_000_000), "SN"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParsePhone(b *testing.B) {
	inputs := []struct {
		raw     string
		country xaalis.Country
	}{
		{"77 123 45 67", "SN"}, {"+2250707123456", "CI"}, {"00229 01 97 12 34 56", "BJ"},
		{"97 12 34 56", "BJ"}, {"+221 33 823 45 67", "SN"}, {"abc", "SN"},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		in := inputs[i%len(inputs)]
		_, _ = xaalis.ParsePhone(in.raw, in.country)
	}
}
