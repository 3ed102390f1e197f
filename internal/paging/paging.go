// Package paging defines cursor pages shared by every list operation.
// Cursors are opaque to clients; each backend encodes its own position.
package paging

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	"github.com/shardmart/shardmart/internal/validation"
)

// DefaultLimit and MaxLimit bound every page.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// Page is one page of results; Next is empty on the last page.
type Page[T any] struct {
	Items []T
	Next  string
}

// Request asks for up to Limit items after Cursor ("" means from the start).
type Request struct {
	Cursor string
	Limit  int
}

// Normalize applies the default and rejects limits out of range.
func (r Request) Normalize() (Request, error) {
	if r.Limit == 0 {
		r.Limit = DefaultLimit
	}
	if r.Limit < 1 || r.Limit > MaxLimit {
		return r, validation.Field("limit", fmt.Sprintf("must be between 1 and %d", MaxLimit))
	}
	if !ValidCursor(r.Cursor) {
		return r, validation.Field("cursor", "is not a cursor this server issued")
	}
	return r, nil
}

// A cursor's shape, as the OpenAPI document states it: at most MaxCursorLen characters of
// unpadded base64url (RFC 4648 §5) encoding a JSON object, so it starts with "e" (for "{")
// and its length is never 1 more than a multiple of 4. Whether it is one this server issued
// for this list is decided when it is decoded.
const (
	MaxCursorLen  = 512
	CursorPattern = `^(e([A-Za-z0-9_-]{4})*[A-Za-z0-9_-]{1,3})?$`
)

var cursorRE = regexp.MustCompile(CursorPattern)

// ValidCursor reports whether s has a cursor's shape ("" is the first page).
func ValidCursor(s string) bool { return len(s) <= MaxCursorLen && cursorRE.MatchString(s) }

// Encode turns a backend position into an opaque cursor.
func Encode(pos any) string {
	b, err := json.Marshal(pos)
	if err != nil {
		panic(fmt.Sprintf("paging: cursor position must marshal: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads a cursor made by Encode into pos; a foreign or damaged cursor is a
// validation error on the "cursor" field.
func Decode(cursor string, pos any) error {
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil && !ValidCursor(cursor) {
		err = errors.New("not a cursor's shape") // the decoder skips line breaks; a cursor has none
	}
	if err == nil {
		err = json.Unmarshal(b, pos)
	}
	if err != nil {
		return validation.Field("cursor", "is not a cursor this server issued")
	}
	return nil
}

// Build makes a page from up to limit+1 fetched items: the extra item only tells that another
// page exists, and position(last) is where the next page starts.
func Build[T any](items []T, limit int, position func(last T) any) Page[T] {
	if len(items) <= limit {
		return Page[T]{Items: items}
	}
	items = items[:limit]
	return Page[T]{Items: items, Next: Encode(position(items[limit-1]))}
}
