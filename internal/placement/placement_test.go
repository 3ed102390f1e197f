package placement

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in      string
		want    map[Family]string
		wantErr string
	}{
		{in: "", want: map[Family]string{Orders: SQLite, Carts: SQLite, Catalog: SQLite}},
		{in: "carts=cassandra, sessions=cassandra", want: map[Family]string{Carts: Cassandra, Sessions: Cassandra, Orders: SQLite}},
		{in: "orders=mongo,carts=mongo", want: map[Family]string{Orders: Mongo, Carts: Mongo, Events: SQLite}},
		{in: "orders=cassandra", wantErr: "transactions"},
		{in: "baskets=sqlite", wantErr: `unknown family "baskets"`},
		{in: "carts=redis", wantErr: `unknown backend "redis"`},
		{in: "carts", wantErr: "want family=backend"},
		{in: "orders=mongo,products=mongo,carts=mongo", want: map[Family]string{Orders: Mongo, Carts: Mongo}},
		{in: "products=mongo", wantErr: "products live with orders"},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Parse(%q): got error %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		for f, b := range tt.want {
			if got[f] != b {
				t.Errorf("Parse(%q)[%s] = %q, want %q", tt.in, f, got[f], b)
			}
		}
		if again, err := Parse(got.String()); err != nil || again.String() != got.String() {
			t.Errorf("round trip of %q: got %q, %v", got.String(), again.String(), err)
		}
	}
}

func TestOpenEmbedded(t *testing.T) {
	s, err := Open(context.Background(), Embedded(), Options{SQLitePath: filepath.Join(t.TempDir(), "x.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Orders == nil || s.Products == nil || s.Outbox == nil || s.Users == nil || s.Carts == nil ||
		s.Sessions == nil || s.Events == nil || s.History == nil || s.Catalog == nil {
		t.Errorf("embedded placement left a family without a repository: %+v", s)
	}
	if s.CatalogSink != nil {
		t.Errorf("embedded catalog needs no projection sink, got %T", s.CatalogSink)
	}
}

func TestReadyNamesTheBackendThatIsDown(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, Embedded(), Options{SQLitePath: filepath.Join(t.TempDir(), "x.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("open store: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var down *DownError
	if err := s.Ready(ctx); !errors.As(err, &down) || len(down.Backends()) != 1 || down.Backends()[0] != SQLite {
		t.Errorf("closed store: got %v, want a DownError naming %s", err, SQLite)
	}
}
