package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

// fuzzTarget covers the shapes request bodies use: strings, integers, pointers and maps.
type fuzzTarget struct {
	productInput
	Quantity int64   `json:"quantity"`
	Note     *string `json:"note,omitzero"`
}

// FuzzDecode: the strict decoder never panics; it either fails with a 4xx problem that names a
// field, or yields a value that survives encode -> strict decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"p1","name":"Mug","category":"kitchen","price":"12.50","attributes":{"c":"red"},"stock":{"eu":3}}`,
		`{"quantity": 2}`, `{"quantity": 1.5}`, `{"quantity": "2"}`, `{"unknown": 1}`, `{"note": null}`,
		`{}`, `[]`, `null`, `"x"`, `{"quantity": 1} {}`, `{"quantity":`, `{"stock":{"eu":-1e400}}`,
		"\xff\xfe", `{"Name":"case"}`, `{"name":"a","name":"b"}`, ``, `   `,
		`{"quantity": 63.0}`, `{"quantity": 6.3e1}`, `{"quantity": 1e-7}`, `{"stock":{"eu":1,"eu":2}}`,
		"{\"name\":\"\xc3\"}", `{"name":"\ud800"}`, `{"attributes":{"a":null}}`, `{"id":""}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "/v1/x", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		var v fuzzTarget
		err := decodeBody(r, &v)
		if err != nil {
			var p *Problem
			if !errors.As(err, &p) {
				t.Fatalf("non-problem error %T: %v", err, err)
			}
			if p.Status != 400 && p.Status != 413 {
				t.Fatalf("status %d for %q", p.Status, body)
			}
			if p.Status == 400 && (len(p.Errors) == 0 || p.Errors[0].Field == "") {
				t.Fatalf("problem names no field: %+v", p)
			}
			return
		}
		raw, err := jsonv2.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var again fuzzTarget
		if err := decodeJSON(raw, &again); err != nil {
			t.Fatalf("re-decode of %s: %v", raw, err)
		}
		if !reflect.DeepEqual(v, again) {
			t.Fatalf("round trip changed %+v into %+v", v, again)
		}
	})
}

// TestDecodeLimits: the size limit is exact, and a slow body that never ends is cut at it.
func TestDecodeLimits(t *testing.T) {
	pad := func(n int) string {
		s := `{"note":"` + strings.Repeat("a", n) + `"}`
		return s
	}
	exact := pad(MaxBodyBytes - len(pad(0)))
	var v fuzzTarget
	if err := decodeBody(httptest.NewRequest("POST", "/", strings.NewReader(exact)), &v); err != nil {
		t.Fatalf("a body of exactly %d bytes: %v", len(exact), err)
	}
	err := decodeBody(httptest.NewRequest("POST", "/", strings.NewReader(exact+" ")), &v)
	var p *Problem
	if !errors.As(err, &p) || p.Status != 413 {
		t.Fatalf("one byte over: %v", err)
	}
}
