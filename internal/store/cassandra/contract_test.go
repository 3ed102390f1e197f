package cassandra

import (
	"testing"

	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/event"
	"github.com/shardmart/shardmart/internal/history"
	"github.com/shardmart/shardmart/internal/session"
	"github.com/shardmart/shardmart/internal/store/storetest"
)

// TestContract runs THE contract suite for every family this backend can hold.
func TestContract(t *testing.T) {
	st := store(t)
	t.Run("carts", func(t *testing.T) {
		storetest.Carts(t, func(*testing.T) cart.Repository { return st.Carts() })
	})
	t.Run("sessions", func(t *testing.T) {
		storetest.Sessions(t, func(*testing.T) session.Repository { return st.Sessions() })
	})
	t.Run("events", func(t *testing.T) {
		storetest.Events(t, func(*testing.T) event.Repository { return st.Events() })
	})
	t.Run("history", func(t *testing.T) {
		storetest.History(t, func(*testing.T) history.Repository { return st.History() })
	})
}
