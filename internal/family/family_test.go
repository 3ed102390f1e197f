package family

import (
	"slices"
	"testing"
)

func TestToCassandraIsTheMigrationOrder(t *testing.T) {
	got := ToCassandra()
	want := []Name{Sessions, Carts, History, Events, Catalog}
	if !slices.Equal(got, want) {
		t.Fatalf("ToCassandra() = %v, want %v", got, want)
	}
}

func TestSpecsAreConsistent(t *testing.T) {
	seen := map[Name]bool{}
	orders := map[int]Name{}
	for _, s := range Specs {
		if seen[s.Name] {
			t.Errorf("family %s declared twice", s.Name)
		}
		seen[s.Name] = true
		if len(s.Backends) == 0 {
			t.Errorf("family %s: no backend can hold it", s.Name)
		}
		if s.MigrationOrder > 0 {
			if prev, dup := orders[s.MigrationOrder]; dup {
				t.Errorf("families %s and %s share migration order %d", prev, s.Name, s.MigrationOrder)
			}
			orders[s.MigrationOrder] = s.Name
			if !s.Holds(Cassandra) {
				t.Errorf("family %s migrates to Cassandra, which cannot hold it", s.Name)
			}
			if s.CopyRate <= 0 {
				t.Errorf("family %s migrates without a copy rate for the plan", s.Name)
			}
		}
	}
	if o, _ := Get(Orders); o.Holds(Cassandra) {
		t.Error("orders need multi-row transactions: Cassandra must not hold them")
	}
}

func TestParseMigratable(t *testing.T) {
	if n, err := ParseMigratable("carts"); err != nil || n != Carts {
		t.Fatalf("carts: %v, %v", n, err)
	}
	for _, bad := range []string{"orders", "", "cart"} {
		if _, err := ParseMigratable(bad); err == nil {
			t.Errorf("%q was accepted", bad)
		}
	}
}

func TestToMongoDualWriteLeavesTheTransactionalFamilyOut(t *testing.T) {
	got := ToMongoDualWrite()
	want := []Name{Sessions, Carts, History, Events}
	if !slices.Equal(got, want) {
		t.Fatalf("ToMongoDualWrite() = %v, want %v (orders and the catalog move behind a freeze)", got, want)
	}
}
