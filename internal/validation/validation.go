// Package validation carries the field at fault from the domain to the API,
// which renders it as an RFC 9457 problem with an "errors" member.
package validation

import (
	"errors"
	"strings"
)

// FieldError names one invalid input field. Field uses JSON names and dots: "items.0.quantity".
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Error is one or more invalid fields. Domain code returns it; errors.As finds it.
type Error struct {
	Fields []FieldError
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Detail
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// Field returns an error for a single invalid field.
func Field(field, detail string) error {
	return &Error{Fields: []FieldError{{Field: field, Detail: detail}}}
}

// Collector gathers field errors so a client learns every fault in one response.
type Collector struct{ fields []FieldError }

// Add records a fault.
func (c *Collector) Add(field, detail string) { c.fields = append(c.fields, FieldError{field, detail}) }

// Check records a fault when ok is false.
func (c *Collector) Check(ok bool, field, detail string) {
	if !ok {
		c.Add(field, detail)
	}
}

// Err is nil when nothing was recorded.
func (c *Collector) Err() error {
	if len(c.fields) == 0 {
		return nil
	}
	return &Error{Fields: c.fields}
}

// Fields extracts the field errors of err, if it is (or wraps) a validation error.
func Fields(err error) ([]FieldError, bool) {
	var v *Error
	if errors.As(err, &v) {
		return v.Fields, true
	}
	return nil, false
}
