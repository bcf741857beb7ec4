package http_test

import (
	"flag"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/xaalis/xaalis/api"
	xhttp "github.com/xaalis/xaalis/internal/http"
	"github.com/xaalis/xaalis/internal/xaalis"
)

var updateDocs = flag.Bool("update", false, "rewrite the generated parts of docs/security.md")

const (
	routesBegin = "<!-- routes: generated from internal/http/routes.go by go test ./internal/http -run TestSecurityDocs -update -->\n"
	routesEnd   = "<!-- end of routes -->"
)

// TestSecurityDocs: docs/security.md's table of routes and scopes is the
// one routes.go registers.
func TestSecurityDocs(t *testing.T) {
	const path = "../../docs/security.md"
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	before, rest, ok := strings.Cut(string(page), routesBegin)
	_, after, ok2 := strings.Cut(rest, routesEnd)
	if !ok || !ok2 {
		t.Fatalf("docs/security.md lacks the generated section markers")
	}
	s := xhttp.NewServer(xaalis.NewApp(nil), slogDiscard(), xhttp.DefaultConfig(), api.OpenAPI, nil)
	// With its opt-in routes: the table says which need `serve --pprof`.
	admin := xhttp.NewAdmin(s.App, slogDiscard(), s, http.NotFoundHandler(), xhttp.AdminOptions{Pprof: true})
	want := before + routesBegin + s.RoutesMarkdown() + "\nThe admin listener (operator API):\n\n" + admin.RoutesMarkdown() + routesEnd + after
	if *updateDocs {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(page) != want {
		t.Fatal("docs/security.md drifted from routes.go; run: go test ./internal/http -run TestSecurityDocs -update")
	}
}
