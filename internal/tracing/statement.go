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
