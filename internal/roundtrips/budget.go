package roundtrips

// Budgets are the statements (SQL statements, CQL statements, MongoDB wire commands) one
// request of each kind may run on its critical path, per placement: the most any request of
// the kind ran in the script. Changing a budget is changing one number here; the test that holds
// the placement to it prints the measured table whenever it fails or runs with -v.
var Budgets = []Budget{
	// placement, request, statements (the worst of Reps requests measured on main)
	{Embedded, Session, 1},
	{Embedded, Browse, 2},
	{Embedded, Search, 2},
	{Embedded, Product, 1},
	{Embedded, Register, 5},
	{Embedded, CartEdit, 14},
	{Embedded, CartView, 4},
	{Embedded, Event, 2},
	{Embedded, Login, 19},
	{Embedded, Checkout, 20},
	{Embedded, OrderView, 2},
	{Embedded, History, 2},

	{Cassandra, Session, 1},
	{Cassandra, Browse, 8},
	{Cassandra, Search, 8},
	{Cassandra, Product, 1},
	{Cassandra, Register, 5},
	{Cassandra, CartEdit, 6},
	{Cassandra, CartView, 3},
	{Cassandra, Event, 2},
	{Cassandra, Login, 13},
	{Cassandra, Checkout, 29},
	{Cassandra, OrderView, 2},
	{Cassandra, History, 3},

	{MongoDB, Session, 1},
	{MongoDB, Browse, 2},
	{MongoDB, Search, 1},
	{MongoDB, Product, 1},
	{MongoDB, Register, 2},
	{MongoDB, CartEdit, 5},
	{MongoDB, CartView, 3},
	{MongoDB, Event, 2},
	{MongoDB, Login, 9},
	{MongoDB, Checkout, 13},
	{MongoDB, OrderView, 2},
	{MongoDB, History, 2},
}
