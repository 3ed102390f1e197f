package cassandra

import "testing"

func TestStatementOp(t *testing.T) {
	for stmt, want := range map[string]string{
		"SELECT product_id, qty FROM user_carts WHERE user_id = ?":  "cassandra.select.user_carts",
		"INSERT INTO shardmart.sessions (id, data) VALUES (?, ?)":   "cassandra.insert.sessions",
		"UPDATE guest_carts USING TTL ? SET qty = ? WHERE id = ?":   "cassandra.update.guest_carts",
		"DELETE FROM \"user_carts\" WHERE user_id = ? AND item = ?": "cassandra.delete.user_carts",
		"":            "cassandra.unknown",
		"BEGIN BATCH": "cassandra.begin",
	} {
		if got := statementOp(stmt); got != want {
			t.Errorf("statementOp(%q) = %q, want %q", stmt, got, want)
		}
	}
}
