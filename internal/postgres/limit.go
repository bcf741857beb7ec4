package postgres

import (
	"strconv"

	"github.com/xaalis/xaalis/internal/xaalis"
)

// A LIMIT or OFFSET given as a parameter makes PostgreSQL plan its
// statement again at every execution. After five custom plans a prepared
// statement switches to its generic plan only if that plan's estimated
// cost is no higher; a generic plan must assume that an unknown LIMIT
// reads a tenth of the rows and that an unknown OFFSET skips a tenth, so
// it always looks dearer than the custom plan of LIMIT 20, and the
// statement is planned again at every call. GET /v1/payments was planned
// at each request; with its limit written in, the list scenario ran 35-70 %
// more requests a second in alternated pairs (docs/write-path.md).
//
// So limits are written into the statement's text. They are integers the
// code bounds (a page's per_page is 1 to xaalis.MaxPerPage, the due
// queries' batch sizes are constants), so the texts are few and each stays
// in the connection's statement cache; an integer formatted by strconv
// cannot carry SQL.

// limitSQL is " LIMIT n", n written into the statement.
func limitSQL(n int) string { return " LIMIT " + strconv.Itoa(n) }

// pageSQL returns a page's LIMIT and OFFSET clause and the statement's
// arguments. The first page, by far the most read, has no OFFSET, so its
// statement gets PostgreSQL's generic plan. A later page's OFFSET stays a
// parameter, the next after args: written into the text, every page of a
// long walk would be a statement of its own, each prepared with an extra
// round trip and pushing the hot statements out of the connection's cache,
// to save one planning of a statement read far less often.
func pageSQL(p xaalis.PageRequest, args ...any) (string, []any) {
	if p.Offset() == 0 {
		return limitSQL(p.PerPage), args
	}
	args = append(args, p.Offset())
	return limitSQL(p.PerPage) + " OFFSET $" + strconv.Itoa(len(args)), args
}
