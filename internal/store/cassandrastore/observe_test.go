package cassandrastore

import "testing"

func TestStatementName(t *testing.T) {
	for stmt, want := range map[string]string{
		"SELECT product_id, qty FROM user_carts WHERE user_id = ?":  "select.user_carts",
		"INSERT INTO shardmart.sessions (id, data) VALUES (?, ?)":   "insert.sessions",
		"UPDATE guest_carts USING TTL ? SET qty = ? WHERE id = ?":   "update.guest_carts",
		"DELETE FROM \"user_carts\" WHERE user_id = ? AND item = ?": "delete.user_carts",
		"":            "unknown",
		"BEGIN BATCH": "begin",
	} {
		if got := statementName(stmt); got != want {
			t.Errorf("statementName(%q) = %q, want %q", stmt, got, want)
		}
	}
}
