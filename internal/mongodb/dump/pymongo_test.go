package dump

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/shardmart/shardmart/internal/mongodb/launcher"
	"github.com/shardmart/shardmart/internal/serverproc"
)

// pymongoVersion is the independent BSON reader the format test decodes the backup with.
const pymongoVersion = "4.18.2"

// pyRead decodes every .bson file given with pymongo's bson package and prints, per file, its
// documents as canonical Extended JSON; and parses every .metadata.json with pymongo's
// json_util, printing it back.
const pyRead = `
import json, sys
import bson
from bson import json_util
from bson.json_util import CANONICAL_JSON_OPTIONS as C
out = {}
for p in sys.argv[1:]:
    if p.endswith(".bson"):
        with open(p, "rb") as f:
            out[p] = [json.loads(json_util.dumps(d, json_options=C)) for d in bson.decode_file_iter(f, bson.CodecOptions(document_class=bson.SON))]
    else:
        with open(p) as f:
            out[p] = json.loads(json_util.dumps(json_util.loads(f.read(), json_options=C), json_options=C))
print(json.dumps(out))
`

// TestBackupFilesReadByPyMongo checks the backup's format with a reader that shares no code
// with ours: pymongo's bson decodes every document of the .bson files to the same canonical
// Extended JSON the Go driver gives for the source documents (every BSON type the shop uses
// and more), and parses each metadata.json, whose indexes, options and UUID must be
// mongodump's shape.
func TestBackupFilesReadByPyMongo(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	lib := pymongoLib(t, ctx)
	db := sourceClient.Database(freshDB("pyread"))
	err := db.CreateCollection(ctx, "typed", options.CreateCollection().
		SetValidator(bson.D{{Key: "n", Value: bson.D{{Key: "$type", Value: "int"}}}}).
		SetCollation(&options.Collation{Locale: "fr", Strength: 2}))
	if err != nil {
		t.Fatal(err)
	}
	dec, err := bson.ParseDecimal128("1234.5678")
	if err != nil {
		t.Fatal(err)
	}
	docs := []any{
		bson.D{{Key: "_id", Value: bson.NewObjectID()}, {Key: "n", Value: int32(1)}, {Key: "big", Value: int64(1) << 40},
			{Key: "f", Value: 0.1}, {Key: "d", Value: dec}, {Key: "at", Value: bson.NewDateTimeFromTime(time.UnixMilli(4102444800123))},
			{Key: "ts", Value: bson.Timestamp{T: 1764331200, I: 7}}, {Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte{0, 1, 254, 255}}},
			{Key: "uuid", Value: bson.Binary{Subtype: bson.TypeBinaryUUID, Data: []byte("0123456789abcdef")}},
			{Key: "re", Value: bson.Regex{Pattern: "^a.*z$", Options: "i"}}, {Key: "null", Value: nil}, {Key: "ok", Value: true},
			{Key: "s", Value: "crème brûlée ☕"}, {Key: "arr", Value: bson.A{int32(1), "two", bson.D{{Key: "three", Value: int64(3)}}}},
			{Key: "nested", Value: bson.D{{Key: "z", Value: int32(1)}, {Key: "a", Value: bson.D{{Key: "deep", Value: bson.A{}}}}}}},
		bson.D{{Key: "_id", Value: "second"}, {Key: "n", Value: int32(2)}, {Key: "min", Value: bson.MinKey{}}, {Key: "max", Value: bson.MaxKey{}}},
	}
	if _, err := db.Collection("typed").InsertMany(ctx, docs); err != nil {
		t.Fatal(err)
	}
	ix := db.Collection("typed").Indexes()
	if _, err := ix.CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "s", Value: 1}, {Key: "at", Value: -1}}, Options: options.Index().SetName("s_at").SetUnique(true)}); err != nil {
		t.Fatal(err)
	}
	// The document's date is in 2100: the TTL monitor leaves it alone while the test runs.
	if _, err := ix.CreateOne(ctx, mongo.IndexModel{Keys: bson.D{{Key: "at", Value: 1}}, Options: options.Index().SetExpireAfterSeconds(3600)}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	m, err := Backup(ctx, sourceClient, BackupOptions{Database: db.Name(), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	bsonPath, metaPath := filepath.Join(out, db.Name(), "typed.bson"), filepath.Join(out, db.Name(), "typed.metadata.json")
	cmd := exec.CommandContext(ctx, "python3", "-c", pyRead, bsonPath, metaPath)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+lib)
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("pymongo could not read the backup: %v\n%s", err, stderrOf(err))
	}
	var got map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("pymongo's output: %v\n%s", err, raw)
	}

	var want []any
	cur, err := db.Collection("typed").Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	for cur.Next(ctx) {
		want = append(want, canonical(t, cur.Current))
	}
	if int64(len(want)) != m.Counts["typed"] {
		t.Fatalf("manifest counts %d typed documents, the source has %d", m.Counts["typed"], len(want))
	}
	if !reflect.DeepEqual(got[bsonPath], want) {
		t.Errorf("pymongo decoded typed.bson as\n%v\nthe source's documents are\n%v", got[bsonPath], want)
	}

	meta, _ := got[metaPath].(map[string]any)
	if meta["collectionName"] != "typed" {
		t.Errorf("metadata collectionName %v", meta["collectionName"])
	}
	if u, _ := meta["uuid"].(string); len(u) != 32 || strings.Trim(u, "0123456789abcdef") != "" {
		t.Errorf("metadata uuid %q, want mongodump's 32 hex digits", meta["uuid"])
	}
	opts, _ := meta["options"].(map[string]any)
	if _, ok := opts["validator"]; !ok {
		t.Errorf("metadata options %v have no validator", opts)
	}
	if coll, _ := opts["collation"].(map[string]any); coll["locale"] != "fr" {
		t.Errorf("metadata options %v: collation locale, want fr", opts)
	}
	byName := map[string]map[string]any{}
	indexes, _ := meta["indexes"].([]any)
	for _, i := range indexes {
		spec, _ := i.(map[string]any)
		name, _ := spec["name"].(string)
		byName[name] = spec
	}
	if len(byName) != 3 || byName["_id_"] == nil || byName["s_at"]["unique"] != true {
		t.Errorf("metadata indexes %v, want _id_, s_at (unique) and at_1", indexes)
	}
	if ttl, _ := byName["at_1"]["expireAfterSeconds"].(map[string]any); ttl["$numberInt"] != "3600" {
		t.Errorf("at_1's expireAfterSeconds %v, want {$numberInt: 3600}", byName["at_1"]["expireAfterSeconds"])
	}
}

// canonical is a document as the JSON value of its canonical Extended JSON.
func canonical(t *testing.T, doc bson.Raw) any {
	t.Helper()
	b, err := bson.MarshalExtJSON(doc, true, false)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// pymongoLib installs pymongo (once, into the shared cache, as the launcher installs mongod)
// and returns the directory to put on PYTHONPATH.
func pymongoLib(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := filepath.Join(launcher.DefaultCacheDir(), "pymongo-"+pymongoVersion)
	installed := func() bool { _, err := os.Stat(filepath.Join(dir, "bson")); return err == nil }
	if installed() {
		return dir
	}
	unlock, err := serverproc.Lock(ctx, dir+".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if installed() { // another test binary installed it while we waited
		return dir
	}
	tmp := dir + ".partial"
	_ = os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "python3", "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
		"--target", tmp, "--only-binary=:all:", "--no-deps", "pymongo=="+pymongoVersion)
	cmd.Env = append(os.Environ(), "PIP_ROOT_USER_ACTION=ignore")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install pymongo==%s (the independent BSON reader): %v\n%s", pymongoVersion, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
