// Package api holds the API contract, api/openapi.yaml, embedded so the
// server can serve it and the tests can check every exchange against it.
package api

import _ "embed"

// OpenAPI is the contents of openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
