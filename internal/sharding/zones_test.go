package sharding

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// sendZoneRange runs the CLI's add-range path (ParseBound, ZoneRangeFor,
// updateZoneKeyRange through RunLogged) against rec, stopping at the first error.
func sendZoneRange(t *testing.T, rec *recorder, c Collection, minJSON, maxJSON string) error {
	t.Helper()
	lo, err := ParseBound(minJSON)
	if err != nil {
		t.Fatal(err)
	}
	hi, err := ParseBound(maxJSON)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ZoneRangeFor(c, lo, hi, "fast")
	if err != nil {
		return err
	}
	return RunLogged(context.Background(), rec, &bytes.Buffer{}, UpdateZoneKeyRangeCmd("shardmart."+c.Name, r))
}

// sentBound is field of the min or max document of the single command sent,
// read back from the BSON bytes the driver would put on the wire.
func sentBound(t *testing.T, rec *recorder, which, field string) bson.RawValue {
	t.Helper()
	if len(rec.sent) != 1 {
		t.Fatalf("sent %d commands, want 1", len(rec.sent))
	}
	b, err := bson.Marshal(rec.sent[0].Cmd)
	if err != nil {
		t.Fatal(err)
	}
	raw := bson.Raw(b)
	v, err := raw.LookupErr(which, field)
	if err != nil {
		t.Fatalf("%s.%s not in %s: %v", which, field, raw, err)
	}
	return v
}

func TestZoneRangeHashedBoundsSentAsNumberLong(t *testing.T) {
	orders := Collection{Name: "orders", Key: Key{hashed("user_id")}}
	compound := Collection{Name: "orders", Key: Key{hashed("user_id"), asc("order_date")}}
	tests := []struct {
		name       string
		c          Collection
		min, max   string
		wantMin    int64 // user_id of min
		wantMaxKey bool  // max user_id stays MaxKey
		wantMax    int64
	}{
		{"int32", orders, `{"user_id": -5}`, `{"user_id": 1000}`, -5, false, 1000},
		{"NumberLong kept", orders, `{"user_id": {"$numberLong": "-4611686018427387902"}}`, `{"user_id": {"$numberLong": "4611686018427387902"}}`, -4611686018427387902, false, 4611686018427387902},
		{"int64 from a big JSON number", orders, `{"user_id": -4611686018427387902}`, "", -4611686018427387902, true, 0},
		{"double without fraction", orders, `{"user_id": -4.0e18}`, `{"user_id": 2.5e3}`, -4000000000000000000, false, 2500},
		{"decimal string", orders, `{"user_id": "-154124144"}`, `{"user_id": "+154124144"}`, -154124144, false, 154124144},
		{"Decimal128 integral", orders, `{"user_id": {"$numberDecimal": "-12E+2"}}`, `{"user_id": {"$numberDecimal": "300"}}`, -1200, false, 300},
		{"compound hashed prefix", compound, `{"user_id": 7}`, `{"user_id": 9}`, 7, false, 9},
		{"open max stays MaxKey", orders, `{"user_id": 0}`, "", 0, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			if err := sendZoneRange(t, rec, tt.c, tt.min, tt.max); err != nil {
				t.Fatal(err)
			}
			lo := sentBound(t, rec, "min", "user_id")
			if lo.Type != bson.TypeInt64 || lo.Int64() != tt.wantMin {
				t.Errorf("min.user_id sent as %s %s, want int64 %d", lo.Type, lo, tt.wantMin)
			}
			hi := sentBound(t, rec, "max", "user_id")
			switch {
			case tt.wantMaxKey && hi.Type != bson.TypeMaxKey:
				t.Errorf("max.user_id sent as %s %s, want MaxKey", hi.Type, hi)
			case !tt.wantMaxKey && (hi.Type != bson.TypeInt64 || hi.Int64() != tt.wantMax):
				t.Errorf("max.user_id sent as %s %s, want int64 %d", hi.Type, hi, tt.wantMax)
			}
			if len(tt.c.Key) == 2 {
				if v := sentBound(t, rec, "min", "order_date"); v.Type != bson.TypeMinKey {
					t.Errorf("min.order_date sent as %s, want MinKey padding", v.Type)
				}
			}
		})
	}
}

func TestZoneRangeNonHashedFieldsUntouched(t *testing.T) {
	// products {category: 1, _id: 1}: an int32 on a ranged field stays int32.
	products := Collection{Name: "products", Key: Key{asc("category"), asc("_id")}}
	rec := newRecorder(t)
	if err := sendZoneRange(t, rec, products, `{"category": "books", "_id": 5}`, `{"category": "books"}`); err != nil {
		t.Fatal(err)
	}
	if v := sentBound(t, rec, "min", "_id"); v.Type != bson.TypeInt32 {
		t.Errorf("min._id sent as %s, want int32 (not hashed)", v.Type)
	}
	if v := sentBound(t, rec, "min", "category"); v.Type != bson.TypeString {
		t.Errorf("min.category sent as %s, want string", v.Type)
	}
}

func TestZoneRangeRefusesNonHashBoundsBeforeSending(t *testing.T) {
	orders := Collection{Name: "orders", Key: Key{hashed("user_id")}}
	tests := []struct {
		name, min, max string
		value          string // how the error names the value
	}{
		{"string", `{"user_id": "alice"}`, "", `"alice"`},
		{"fractional number", `{"user_id": 1.5}`, "", "1.5"},
		{"out of range number", "", `{"user_id": 1e19}`, "1e+19"},
		{"decimal string out of range", `{"user_id": "9223372036854775808"}`, "", `"9223372036854775808"`},
		{"fractional Decimal128", `{"user_id": {"$numberDecimal": "2.5"}}`, "", "2.5"},
		{"ObjectId", `{"user_id": {"$oid": "6a1fae000000000000000000"}}`, "", `ObjectId("6a1fae000000000000000000")`},
		{"bool", `{"user_id": true}`, "", "true"},
		{"null", `{"user_id": null}`, "", "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newRecorder(t)
			err := sendZoneRange(t, rec, orders, tt.min, tt.max)
			if !errors.Is(err, ErrHashedBound) {
				t.Fatalf("err = %v, want ErrHashedBound", err)
			}
			if len(rec.sent) != 0 {
				t.Errorf("sent %v, want nothing", rec.sent)
			}
			msg := err.Error()
			for _, want := range []string{"orders", "user_id", tt.value, "NumberLong"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
		})
	}
}

func TestHashedBoundsKeepMinMaxKey(t *testing.T) {
	c := Collection{Name: "events", Key: Key{hashed("user_id"), asc("_id")}}
	r, err := ZoneRangeFor(c, nil, nil, "fast")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"updateZoneKeyRange":"db.events","min":{"user_id":{"$minKey":1},"_id":{"$minKey":1}},"max":{"user_id":{"$maxKey":1},"_id":{"$maxKey":1}},"zone":"fast"}`
	if got := ext(t, UpdateZoneKeyRangeCmd("db.events", r)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
