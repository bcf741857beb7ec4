package xaalis

import (
	"fmt"
	"net/http"
	"strings"
)

// ErrorsMarkdown renders docs/errors.md from Catalogue, so the published
// error reference and the code cannot drift apart (a test compares them).
func ErrorsMarkdown() string {
	var b strings.Builder
	b.WriteString(`# Errors

<!-- Generated from internal/xaalis/error.go by
     go test ./internal/xaalis -run TestErrorDocs -update
     Do not edit by hand. -->

Every error answers with this envelope, and the header ` + "`X-Request-Id`" + ` (quote it
when you write to support). 429 and 503 answers carry ` + "`Retry-After`" + ` (seconds), and so
does a 409 ` + "`idempotency_conflict`" + ` met while the key's request is still in flight
(` + "`Retry-After: 1`" + `: send the same request again then, and it answers that request's outcome).

` + "```json" + `
{
  "error": {
    "code": "amount_below_provider_minimum",
    "message": "The amount is below the provider's minimum.",
    "context": {"minimum": 200, "provider": "channel_b", "currency": "XOF"},
    "documentation_url": "https://docs.xaalis.dev/errors#amount_below_provider_minimum"
  }
}
` + "```" + `

- ` + "`code`" + ` is stable: branch on it, never on ` + "`message`" + `.
- ` + "`context`" + ` is present only when the error carries structured data.
- ` + "`validation_error`" + ` also carries ` + "`errors`" + `: field name to a list of messages.
- A 500 ` + "`api_error`" + ` shows only the request id; the details are in our logs.

How to react:

| Situation | Action |
|---|---|
| 400, 422 | Correct the request, then send it with a **new** ` + "`Idempotency-Key`" + ` (4xx answers are stored and replayed for the old key). |
| 401 | Check the key; do not retry. |
| 403 | Use a key with the scope or mode the object needs. |
| 409 | With ` + "`Retry-After`" + `: your own request still runs; send it again after the wait. Without: review your idempotency logic, one key, one request. |
| 429 | Wait ` + "`Retry-After`" + ` seconds, then retry. |
| 5xx | Retry with the **same** ` + "`Idempotency-Key`" + ` and exponential backoff: 5xx answers are not stored, so the retry runs. |

`)
	group := ""
	for _, e := range Catalogue {
		if e.Group != group {
			group = e.Group
			fmt.Fprintf(&b, "## %s\n\n", group)
		}
		fmt.Fprintf(&b, "### %s\n\n", e.Code)
		fmt.Fprintf(&b, "HTTP %d %s.", e.Status, http.StatusText(e.Status))
		if len(e.Context) > 0 {
			fmt.Fprintf(&b, " Context: `%s`.", strings.Join(e.Context, "`, `"))
		}
		fmt.Fprintf(&b, "\n\n%s\n\n", e.Message)
	}
	return b.String()
}
