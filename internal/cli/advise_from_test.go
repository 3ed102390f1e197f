package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
)

func TestAdviseFromFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--collection", "shop.orders"}, "go with --from"},
		{[]string{"--from", "mongodb://127.0.0.1:1", "--candidate", "{user_id: 2}", "--collection", "shop.orders"}, "want 1 or hashed"},
		{[]string{"--from", "mongodb://127.0.0.1:1"}, "--from needs --collection"},
		{[]string{"--from", "mongodb://127.0.0.1:1", "--collection", "a.b", "--scenario", "carts"}, "give exactly one of"},
	}
	for _, tt := range tests {
		_, _, err := runAdviseCmd(t, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("advise %v: got %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

// `advise --from` on a real replica set: the report with analyzeShardKey's field names, the
// JSON document on stdout, and a one-line refusal for a missing collection.
func TestAdviseFromReplicaSet(t *testing.T) {
	set := launcher.ForTest(t, launcher.Options{Members: 1, BasePort: launcher.AdviseTestPort + 95})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := mongo.Connect(options.Client().ApplyURI(set.URI()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Disconnect(context.Background())
	var docs []any
	// 4 000 documents: 200 sampled stay under 5 % of the collection, the random-cursor path.
	for i := range 4000 {
		docs = append(docs, bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "user_id", Value: fmt.Sprintf("u%03d", i%10)}, {Key: "total_cents", Value: int64(i)}})
	}
	if _, err := cl.Database("shop").Collection("orders").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	out, _, err := runAdviseCmd(t, "--from", set.URI(), "--collection", "shop.orders", "--candidate", "{user_id: hashed}", "--sample", "200", "--json", "-")
	if err != nil {
		t.Fatal(err)
	}
	text, js, ok := strings.Cut(out, "\n{\n")
	if !ok {
		t.Fatalf("no JSON document after the report:\n%s", out)
	}
	js = "{\n" + js
	t.Log("\n" + text)
	for _, want := range []string{"live collection shop.orders: 4000 documents", "not sharded (simulated on 3 shards)", `{ user_id: "hashed" }: numDocsSampled 200, numDistinctValues 10`, "mostCommonValues:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rep struct {
		NumDocs            int64 `json:"numDocs"`
		KeyCharacteristics []struct {
			Key               string `json:"key"`
			NumDistinctValues int64  `json:"numDistinctValues"`
			MostCommonValues  []struct {
				Frequency int64 `json:"frequency"`
			} `json:"mostCommonValues"`
			Monotonicity struct {
				Type string `json:"type"`
			} `json:"monotonicity"`
		} `json:"keyCharacteristics"`
		Results []struct{ Collection string }
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("json on stdout: %v\n%s", err, js)
	}
	if rep.NumDocs != 4000 || len(rep.KeyCharacteristics) != 1 || rep.KeyCharacteristics[0].NumDistinctValues != 10 ||
		rep.KeyCharacteristics[0].Monotonicity.Type != "not monotonic" || len(rep.Results) != 1 {
		t.Errorf("json: %+v, want 4000 documents, one candidate with 10 distinct values, not monotonic, one result", rep)
	}
	_, _, err = runAdviseCmd(t, "--from", set.URI(), "--collection", "shop.nothing")
	if err == nil || err.Error() != "collection shop.nothing not found" {
		t.Errorf("missing collection: got %v, want the one-line refusal", err)
	}
}
