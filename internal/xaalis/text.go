package xaalis

import "unicode/utf8"

// The text rules every door applies to what people write (names, reasons,
// notes): valid UTF-8 without control characters. The HTTP layer applies
// them to every string of a request; the commands below apply them
// again, so that the command line and the console, which send no JSON,
// store nothing the API would refuse (an escape sequence in a merchant's
// name reached API answers and operators' terminals).
const (
	// MsgControl is the fault of a string holding a control character.
	MsgControl = "must not contain control characters (U+0000–U+001F, U+007F–U+009F)"
	// MsgControlText is the fault of free text holding a control
	// character other than tab and line breaks.
	MsgControlText = "must not contain control characters other than tab and newline"
	// MsgUTF8 is the fault of a string that is not UTF-8.
	MsgUTF8 = "must be valid UTF-8"
)

// TextFault reports the first fault of s, "" when it is clean: invalid
// UTF-8, or a control character (C0, DEL, C1). Free text (prose written
// by people: a reason, a note, a description) may also hold tab, LF, and
// CR directly before LF.
func TextFault(s string, freeText bool) string {
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			return MsgUTF8
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			if !freeText {
				return MsgControl
			}
			if r != '\t' && r != '\n' && !(r == '\r' && i+1 < len(s) && s[i+1] == '\n') {
				return MsgControlText
			}
		}
		i += n
	}
	return ""
}

// checkText adds field's fault to v when s breaks the text rules.
func checkText(v ValidationErrors, field, s string, freeText bool) {
	if msg := TextFault(s, freeText); msg != "" {
		v.Add(field, msg)
	}
}

// maxNote is the most characters an operator's note or reason holds.
const maxNote = 1000

// checkNote adds field's faults to v for an operator's free text: the
// text rules and at most maxNote characters.
func checkNote(v ValidationErrors, field, s string) {
	checkText(v, field, s, true)
	if utf8.RuneCountInString(s) > maxNote {
		v.Add(field, "must be at most 1000 characters")
	}
}
