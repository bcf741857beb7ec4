package http

import "net/http"

// HandleForTest registers a route of a test's own on the API, behind the
// same request wrapping (ids, access log, recovery) as the real routes.
func (s *Server) HandleForTest(pattern string, h http.HandlerFunc) { s.mux.HandleFunc(pattern, h) }
