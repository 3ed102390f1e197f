package tracing

import "strings"

// StatementName names a CQL or SQL statement by its verb and table: "SELECT ... FROM
// user_carts" is "select.user_carts". The set is small and fixed (one per statement shape), so
// it can label metrics and group a breakdown.
func StatementName(stmt string) string {
	f := strings.Fields(stmt)
	if len(f) == 0 {
		return "unknown"
	}
	verb := strings.ToLower(f[0])
	table := ""
	for i, w := range f {
		switch u := strings.ToUpper(w); {
		case verb == "update" && i == 1, (u == "FROM" || u == "INTO") && i+1 < len(f):
			if verb == "update" {
				table = w
			} else {
				table = f[i+1]
			}
		}
		if table != "" {
			break
		}
	}
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		table = table[i+1:]
	}
	table = strings.Trim(strings.ToLower(table), `"(;`)
	if table == "" {
		return verb
	}
	return verb + "." + table
}

// IsConditional reports whether a CQL statement is a lightweight transaction: an INSERT,
// UPDATE or DELETE with an IF clause (IF NOT EXISTS, IF EXISTS, IF col = ?). It reads words,
// case-insensitively, outside quoted literals and identifiers, so a value or a column holding
// "if" does not count, nor does DDL's CREATE TABLE IF NOT EXISTS.
func IsConditional(stmt string) bool {
	verb := true
	for i := 0; i < len(stmt); {
		switch c := stmt[i]; {
		case c == '\'' || c == '"':
			// To the closing quote; a doubled quote inside closes and reopens: the same.
			j := strings.IndexByte(stmt[i+1:], c)
			if j < 0 {
				return false
			}
			i += j + 2
		case isWordByte(c):
			j := i
			for j < len(stmt) && isWordByte(stmt[j]) {
				j++
			}
			w := stmt[i:j]
			if verb {
				if !strings.EqualFold(w, "insert") && !strings.EqualFold(w, "update") && !strings.EqualFold(w, "delete") {
					return false
				}
				verb = false
			} else if strings.EqualFold(w, "if") {
				return true
			}
			i = j
		default:
			i++
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}
