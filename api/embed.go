// Package api holds toolserverd's HTTP contract, api/openapi.yaml, embedded so the
// daemon can serve it (GET /openapi.yaml) and clients can generate from it.
package api

import _ "embed"

// OpenAPI is the contract document, as in the repository.
//
//go:embed openapi.yaml
var OpenAPI []byte
