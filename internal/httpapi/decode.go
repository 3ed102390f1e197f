package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// MaxBodyBytes bounds every request body but the bulk user route's (413 beyond it).
const MaxBodyBytes = 64 << 10

// MaxBulkBodyBytes bounds the bulk user route's body: account.MaxRegisterMany addresses of
// the longest length fit in it.
const MaxBulkBodyBytes = 1 << 20

// decodeBody reads exactly one JSON object into dst, strictly: JSON content type, at most
// MaxBodyBytes, no unknown fields, nothing after the value. Every failure is a problem naming
// the field or offset at fault.
func decodeBody(r *http.Request, dst any) error { return decodeBodyUpTo(r, dst, MaxBodyBytes) }

// decodeBodyUpTo is decodeBody with a body of at most limit bytes.
func decodeBodyUpTo(r *http.Request, dst any, limit int) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return problem(http.StatusUnsupportedMediaType, "unsupported-media-type", "Unsupported media type",
				"send Content-Type: application/json")
		}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(limit)
		}
		return problem(http.StatusBadRequest, "malformed-body", "Malformed body", "the request body could not be read")
	}
	if len(body) > limit {
		return tooLarge(limit)
	}
	return decodeJSON(body, dst)
}

func tooLarge(limit int) *Problem {
	return problem(http.StatusRequestEntityTooLarge, "body-too-large", "Request body too large",
		fmt.Sprintf("the body must be at most %d bytes", limit))
}

// Request bodies are read with github.com/go-json-experiment/json, the module that became
// encoding/json/v2 (in Go 1.26 the standard library's copy still needs GOEXPERIMENT=jsonv2, which
// this build must not depend on; on Go 1.27 the module aliases it). Its defaults are what lets a
// gateway and this server read one body alike, where encoding/json differs: a duplicate member
// name, invalid UTF-8 and a lone surrogate are syntax errors (not "last one wins" or U+FFFD),
// and names match case-sensitively. Unknown members are refused on top of that, and integers
// are read as JSON Schema counts them (63.0 and 6.3e1 are the integer 63).
var decodeOptions = jsonv2.JoinOptions(
	jsonv2.RejectUnknownMembers(true),
	jsonv2.WithUnmarshalers(jsonv2.UnmarshalFromFunc(unmarshalInteger)),
)

// decodeJSON is the strict decoder behind decodeBody (and FuzzDecode).
func decodeJSON(body []byte, dst any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return malformed("body", "a JSON object is required")
	}
	if err := checkShape(body); err != nil {
		return err
	}
	if err := jsonv2.Unmarshal(body, dst, decodeOptions); err != nil {
		return decodeProblem(err)
	}
	return nil
}

// checkShape reads the body's tokens once, so syntax errors (exactly one value, no duplicate
// names, valid UTF-8) come first, then two rules of the OpenAPI document that Unmarshal would let
// pass: the body is an object, and no member is null (no field is nullable, and a null would
// otherwise read as "absent").
func checkShape(body []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	for first := true; ; first = false {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return decodeProblem(err)
		}
		switch {
		case first && tok.Kind() != '{':
			return malformed("body", "must be a JSON object")
		case tok.Kind() == 'n':
			return malformed(fieldName(dec.StackPointer()), "must not be null")
		}
	}
}

func malformed(field, detail string) *Problem {
	p := badRequest(field, detail)
	p.Type, p.Title = problemBase+"malformed-json", "Malformed JSON"
	return p
}

// fieldName turns a JSON Pointer into the dotted field names problems use ("/stock/eu" is
// "stock.eu"); the whole body is "body".
func fieldName(p jsontext.Pointer) string {
	name := strings.Join(slices.Collect(p.Tokens()), ".")
	if name == "" {
		return "body"
	}
	return name
}

var (
	errNotInteger = errors.New("must be an integer")
	errIntRange   = errors.New("is out of range")
)

// unmarshalInteger reads every int64 of a request. A non-number is left to the default, which
// reports the type mismatch.
func unmarshalInteger(dec *jsontext.Decoder, v *int64) error {
	if dec.PeekKind() != '0' {
		return errors.ErrUnsupported
	}
	val, err := dec.ReadValue()
	if err != nil {
		return err
	}
	n, err := jsonInteger(string(val))
	if err != nil {
		return err
	}
	*v = n
	return nil
}

// jsonInteger reads a JSON number literal that JSON Schema calls an integer: any number whose
// value has no fraction, however it is spelt. The float parse bounds the magnitude before the
// exact rational check, so no literal makes big.Rat work hard.
func jsonInteger(lit string) (int64, error) {
	if n, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return n, nil
	}
	if f, err := strconv.ParseFloat(lit, 64); err != nil || math.Abs(f) >= math.MaxInt64 {
		if err == nil && f != math.Trunc(f) {
			return 0, errNotInteger
		}
		return 0, errIntRange
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok || !r.IsInt() {
		return 0, errNotInteger
	}
	if !r.Num().IsInt64() {
		return 0, errIntRange
	}
	return r.Num().Int64(), nil
}

// decodeProblem translates the decoder's errors, which carry the JSON Pointer of the member at
// fault, into a problem naming that field.
func decodeProblem(err error) *Problem {
	var syn *jsontext.SyntacticError
	var sem *jsonv2.SemanticError
	switch {
	case errors.As(err, &syn):
		field := fieldName(syn.JSONPointer)
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			return malformed(field, "is given more than once")
		case errors.Is(syn.Err, io.ErrUnexpectedEOF):
			return malformed("body", "ends before the JSON value is complete")
		}
		return malformed(field, fmt.Sprintf("is not valid JSON at offset %d: %v", syn.ByteOffset, syn.Err))
	case errors.As(err, &sem):
		field := fieldName(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, jsonv2.ErrUnknownName):
			if sem.JSONPointer.LastToken() == "" {
				return malformed("body", "has a member with an empty name")
			}
			return malformed(field, "is not a known field (names are case-sensitive)")
		case errors.Is(sem.Err, errNotInteger), errors.Is(sem.Err, errIntRange):
			return malformed(field, sem.Err.Error())
		case sem.GoType != nil:
			return malformed(field, "must be "+jsonKind(sem.GoType))
		}
		return malformed(field, "could not be decoded")
	}
	return malformed("body", "could not be decoded")
}

// jsonKind names a Go type the way a JSON client thinks of it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Bool:
		return "a boolean"
	}
	return "of type " + t.String()
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
