package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// MaxBodyBytes bounds every request body (413 beyond it).
const MaxBodyBytes = 64 << 10

// decodeBody reads exactly one JSON object into dst, strictly: JSON content type, at most
// MaxBodyBytes, no unknown fields, nothing after the value. Every failure is a problem naming
// the field or offset at fault.
func decodeBody(r *http.Request, dst any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return problem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
				"send Content-Type: application/json")
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge()
		}
		return problem(http.StatusBadRequest, "malformed-body", "Malformed body", "the request body could not be read")
	}
	if len(body) > MaxBodyBytes {
		return tooLarge()
	}
	return decodeJSON(body, dst)
}

func tooLarge() *Problem {
	return problem(http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large",
		fmt.Sprintf("the body must be at most %d bytes", MaxBodyBytes))
}

// decodeJSON is the strict decoder behind decodeBody (and FuzzDecode).
func decodeJSON(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return malformed("body", "a JSON object is required")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeProblem(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return malformed("body", "must hold exactly one JSON value")
	}
	return nil
}

func malformed(field, detail string) *Problem {
	p := badRequest(field, detail)
	p.Type, p.Title = problemBase+"malformed-json", "Malformed JSON"
	return p
}

// decodeProblem translates encoding/json's errors, which carry the field or offset.
func decodeProblem(err error) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return malformed("body", fmt.Sprintf("is not valid JSON at offset %d: %s", syn.Offset, syn.Error()))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("body", "ends before the JSON value is complete")
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return malformed("body", "must be a JSON object")
		}
		return malformed(field, "must be "+jsonKind(typ.Type.String()))
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, err := strconv.Unquote(name); err == nil {
			name = f
		}
		if name == "" {
			return malformed("body", "has a member with an empty name")
		}
		return malformed(name, "is not a known field")
	}
	return malformed("body", "could not be decoded")
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case goType == "string", goType == "*string":
		return "a string"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "*map["), strings.HasPrefix(goType, "struct"):
		return "an object"
	case goType == "bool":
		return "a boolean"
	}
	return "of type " + goType
}

// reply sends v with status; handlers end with it.
func reply(w http.ResponseWriter, status int, v any) error {
	writeJSON(w, status, v)
	return nil
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
