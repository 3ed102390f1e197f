package httpapi

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"gopkg.in/yaml.v3"
)

// openapiYAML is the hand-written OpenAPI 3.1 document (YAML is easier to keep by hand);
// /openapi.json serves it as JSON. TestOpenAPIMatchesRoutes keeps it and the route table in step.
//
//go:embed openapi.yaml
var openapiYAML []byte

var openapiJSON = mustJSONDocument(openapiYAML)

func mustJSONDocument(src []byte) []byte {
	var doc map[string]any
	if err := yaml.Unmarshal(src, &doc); err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml: %v", err))
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic(fmt.Sprintf("httpapi: openapi.yaml is not JSON-compatible: %v", err))
	}
	return b
}

func (s *server) openapi(w http.ResponseWriter, _ *http.Request, _ *caller) error {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openapiJSON)
	return nil
}
