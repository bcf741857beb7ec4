package http

import (
	"strings"
)

// RoutesMarkdown renders the table of routes, who may call them and the
// scopes they need, for docs/security.md; a test holds the page to it, so
// the documentation cannot drift from routes.go.
func (s *Server) RoutesMarkdown() string { return routesMarkdown(s.Routes()) }

// RoutesMarkdown renders the admin listener's routes, for docs/security.md.
func (a *Admin) RoutesMarkdown() string { return routesMarkdown(a.Routes()) }

func routesMarkdown(routes []Route) string {
	var b strings.Builder
	b.WriteString("| Route | Who may call it | Scopes a secret key needs |\n|---|---|---|\n")
	for _, r := range routes {
		scopes := "—"
		if len(r.Scopes) > 0 {
			names := make([]string, len(r.Scopes))
			for i, sc := range r.Scopes {
				names[i] = "`" + string(sc) + "`"
			}
			scopes = strings.Join(names, " and ")
		}
		b.WriteString("| `" + r.Pattern + "` | " + r.Access + " | " + scopes + " |\n")
	}
	return b.String()
}
