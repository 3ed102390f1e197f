package httpapi

import (
	_ "embed"
	"net/http"
)

// openapiJSON is the hand-written OpenAPI 3.1 document; TestOpenAPIMatchesRoutes keeps it and
// the route table in step.
//
//go:embed openapi.json
var openapiJSON []byte

func (s *server) openapi(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openapiJSON)
	return nil
}
