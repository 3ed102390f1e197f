package httpapi

import (
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/shardmart/shardmart/internal/account"
	"github.com/shardmart/shardmart/internal/cart"
	"github.com/shardmart/shardmart/internal/catalog"
	"github.com/shardmart/shardmart/internal/money"
	"github.com/shardmart/shardmart/internal/paging"
	"github.com/shardmart/shardmart/internal/validation"
)

// TestOpenAPIStatesServerChecks: for each value the server checks on its own (path ids,
// slugs, cursors, passwords, money), the served document's schema and the server's check
// agree on every string, so the document neither hides a constraint the server enforces nor
// allows what the server refuses. Strings come from the schema's own pattern, the same with
// one edit (a line break, a non-ASCII letter, base64 padding, ...), and at random.
func TestOpenAPIStatesServerChecks(t *testing.T) {
	doc := loadDoc(t, openapiJSON)
	for _, c := range []struct {
		name   string
		schema string
		server func(string) bool
	}{
		{"ID (path ids)", "#/components/schemas/ID", catalog.ValidID},
		{"Slug", "#/components/schemas/Slug", catalog.ValidSlug},
		{"cursor", "#/components/parameters/Cursor/schema", paging.ValidCursor},
		{"Money", "#/components/schemas/Money", func(s string) bool { _, err := money.Parse(s); return err == nil }},
		{"password", "#/components/requestBodies/Credentials/content/application~1json/schema/properties/password", func(s string) bool {
			return !namesField(account.ValidateCredentials("a@example.com", s), "password")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			pattern, _ := doc.flat(c.schema)["pattern"].(string)
			rapid.Check(t, func(rt *rapid.T) {
				s := rapid.OneOf(
					rapid.StringMatching(`^[A-Za-z0-9_=.é😀\n -]{0,80}$`),
					rapid.StringOfN(rapid.SampledFrom([]rune{'a', 'é', '€', '😀'}), 0, 80, -1),
				).Draw(rt, "any")
				if pattern != "" && rapid.Bool().Draw(rt, "from the pattern") {
					s = rapid.StringMatching(pattern).Draw(rt, "matching")
					if rapid.Bool().Draw(rt, "edited") {
						at := rapid.IntRange(0, len(s)).Draw(rt, "at")
						for at > 0 && at < len(s) && !utf8.RuneStart(s[at]) {
							at--
						}
						s = s[:at] + rapid.SampledFrom([]string{"\n", "é", "=", ".", "a", "", "-", "0"}).Draw(rt, "insert") + s[at:]
					}
				}
				inDoc := doc.validate(c.schema, s) == nil
				if got := c.server(s); got != inDoc {
					rt.Fatalf("%q: the server accepts it: %v, the document: %v", s, got, inDoc)
				}
			})
		})
	}
}

// TestOpenAPITotalsHoldTheLargestCart: the largest line total and cart or order total the
// server's limits allow (cart.MaxItems lines of cart.MaxQuantity units at money.Max) match the
// Total schema, and a single price stays a Money.
func TestOpenAPITotalsHoldTheLargestCart(t *testing.T) {
	doc := loadDoc(t, openapiJSON)
	line, err := money.Max.Mul(cart.MaxQuantity)
	if err != nil {
		t.Fatal(err)
	}
	total, err := line.Mul(cart.MaxItems)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []money.Amount{0, 1, money.Max, line, total} {
		if err := doc.validate("#/components/schemas/Total", a.String()); err != nil {
			t.Errorf("total %s does not match Total: %v", a, err)
		}
	}
	if err := doc.validate("#/components/schemas/Money", money.Max.String()); err != nil {
		t.Errorf("money.Max %s does not match Money: %v", money.Max, err)
	}
}

// namesField reports whether err is a validation error naming field.
func namesField(err error, field string) bool {
	fields, _ := validation.Fields(err)
	for _, f := range fields {
		if f.Field == field {
			return true
		}
	}
	return false
}
