package dump

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/shardmart/shardmart/internal/backup"
)

// ErrNotEmpty is returned (wrapped) when the restore's target database already has a
// collection: a restore never mixes a backup with other data.
var ErrNotEmpty = errors.New("dump: the target database is not empty")

// Batch bounds of one ordered insertMany: far under the 48 MB message limit, so the driver
// never has to split a batch.
const (
	batchDocs  = 1000
	batchBytes = 8 << 20
	maxDocSize = 16 << 20
)

// RestoreOptions describe one restore.
type RestoreOptions struct {
	Dir      string // a sealed backup directory
	Database string // the target database: must hold no collection; empty: the backup's source
	// Progress gets a line per collection and one every ProgressEvery on long collections.
	Progress      io.Writer
	ProgressEvery time.Duration // default 5 s
}

// Restore verifies the backup in o.Dir against its manifest, loads it into an empty database
// (collections with their options, documents in ordered batches, then the indexes) and checks
// each collection's count, taken before its indexes are built, against the manifest: any
// difference is an error wrapping backup.ErrMismatch.
func Restore(ctx context.Context, client *mongo.Client, o RestoreOptions) (backup.Manifest, error) {
	if o.ProgressEvery == 0 {
		o.ProgressEvery = 5 * time.Second
	}
	m, err := backup.Verify(o.Dir)
	if err != nil {
		return m, err
	}
	if m.Store != StoreName {
		return m, fmt.Errorf("dump: %s is a %s backup, not a MongoDB one", o.Dir, m.Store)
	}
	if o.Database == "" {
		o.Database = m.Source
	}
	if _, err := describe(ctx, client); err != nil {
		return m, err
	}
	db := client.Database(o.Database, options.Database().SetWriteConcern(writeconcern.Majority()))
	existing, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return m, fmt.Errorf("dump: list collections of %s: %w", o.Database, err)
	}
	if len(existing) > 0 {
		slices.Sort(existing)
		return m, fmt.Errorf("%w: %s has %d collections (%v): restore into a new database (--mongo-db) or drop this one first", ErrNotEmpty, o.Database, len(existing), existing)
	}
	src := filepath.Join(o.Dir, m.Source)
	progress(o.Progress, "restoring %s (consistent at %s, cluster time %s) into %s", m.Source, m.ConsistentAt.Format(time.RFC3339), m.Meta[MetaClusterTime], o.Database)
	loaded := map[string]int64{}
	for _, name := range slices.Sorted(maps.Keys(m.Counts)) {
		meta, err := readMetadata(filepath.Join(src, name+".metadata.json"))
		if err != nil {
			return m, err
		}
		if err := createCollection(ctx, db, meta); err != nil {
			return m, err
		}
		if _, err := loadDocuments(ctx, db.Collection(name), filepath.Join(src, name+".bson"), o); err != nil {
			return m, err
		}
		// Counted before the indexes exist: a TTL index would start deleting the documents
		// that expired since the backup (old sessions, rate-limit counters) before the count.
		n, err := db.Collection(name).CountDocuments(ctx, bson.D{})
		if err != nil {
			return m, fmt.Errorf("dump: count %s: %w", name, err)
		}
		loaded[name] = n
		if err := createIndexes(ctx, db, meta); err != nil {
			return m, err
		}
	}
	if err := backup.CheckCounts(m, loaded); err != nil {
		return m, fmt.Errorf("dump: restored %s into %s: %w", o.Dir, o.Database, err)
	}
	return m, nil
}

func readMetadata(path string) (metadata, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return metadata{}, fmt.Errorf("dump: %w", err)
	}
	var m metadata
	if err := bson.UnmarshalExtJSON(b, true, &m); err != nil {
		return metadata{}, fmt.Errorf("dump: %s: %w", path, err)
	}
	if m.CollectionName == "" {
		return metadata{}, fmt.Errorf("dump: %s names no collection", path)
	}
	return m, nil
}

// createCollection recreates the collection with its options (validator, collation, capped,
// clustered index...) as listCollections reported them.
func createCollection(ctx context.Context, db *mongo.Database, m metadata) error {
	cmd := append(bson.D{{Key: "create", Value: m.CollectionName}}, m.Options...)
	if err := db.RunCommand(ctx, cmd).Err(); err != nil {
		return fmt.Errorf("dump: create collection %s with options %v: %w", m.CollectionName, m.Options, err)
	}
	return nil
}

// createIndexes builds the collection's indexes (all but _id's, which create made) after its
// documents are in: one build per index instead of an update per insert.
func createIndexes(ctx context.Context, db *mongo.Database, m metadata) error {
	var specs bson.A
	for _, ix := range m.Indexes {
		spec := bson.D{}
		name := ""
		for _, e := range ix {
			switch e.Key {
			case "ns": // written by servers before 4.4; createIndexes refuses it
				continue
			case "name":
				name, _ = e.Value.(string)
			}
			spec = append(spec, e)
		}
		if name == "_id_" {
			continue
		}
		specs = append(specs, spec)
	}
	if len(specs) == 0 {
		return nil
	}
	err := db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: m.CollectionName}, {Key: "indexes", Value: specs}}).Err()
	if err != nil {
		return fmt.Errorf("dump: create indexes on %s: %w", m.CollectionName, err)
	}
	return nil
}

// loadDocuments inserts the documents of a .bson file in ordered batches.
func loadDocuments(ctx context.Context, coll *mongo.Collection, path string, o RestoreOptions) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("dump: %w", err)
	}
	defer f.Close()
	r := NewReader(f)
	var (
		batch []any
		size  int
		n     int64
	)
	start, last := time.Now(), time.Now()
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if _, err := coll.InsertMany(ctx, batch, options.InsertMany().SetOrdered(true)); err != nil {
			return fmt.Errorf("dump: insert into %s after %d documents: %w", coll.Name(), n, err)
		}
		n += int64(len(batch))
		batch, size = batch[:0], 0
		if time.Since(last) >= o.ProgressEvery {
			last = time.Now()
			progress(o.Progress, "  %s: %d documents, %.0f documents/s", coll.Name(), n, rate(n, time.Since(start)))
		}
		return nil
	}
	for {
		doc, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("dump: %s: %w", path, err)
		}
		if len(batch) == batchDocs || size+len(doc) > batchBytes {
			if err := flush(); err != nil {
				return n, err
			}
		}
		batch = append(batch, doc)
		size += len(doc)
	}
	if err := flush(); err != nil {
		return n, err
	}
	progress(o.Progress, "  %s: %d documents in %s (%.0f documents/s)", coll.Name(), n, time.Since(start).Round(time.Millisecond), rate(n, time.Since(start)))
	return n, nil
}

// Reader reads the concatenated BSON documents of a .bson file, checking each one.
type Reader struct {
	r   *bufio.Reader
	off int64
}

// NewReader reads documents from r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 1<<20)} }

// Next returns the next document, io.EOF after the last one.
func (r *Reader) Next() (bson.Raw, error) {
	var head [4]byte
	if _, err := io.ReadFull(r.r, head[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF
		}
		return nil, fmt.Errorf("document at byte %d: truncated length: %w", r.off, err)
	}
	size := int(int32(binary.LittleEndian.Uint32(head[:])))
	if size < 5 || size > maxDocSize {
		return nil, fmt.Errorf("document at byte %d: length %d is not a BSON document's", r.off, size)
	}
	doc := make([]byte, size)
	copy(doc, head[:])
	if _, err := io.ReadFull(r.r, doc[4:]); err != nil {
		return nil, fmt.Errorf("document at byte %d: truncated (%d bytes announced): %w", r.off, size, err)
	}
	if err := bson.Raw(doc).Validate(); err != nil {
		return nil, fmt.Errorf("document at byte %d: %w", r.off, err)
	}
	r.off += int64(size)
	return doc, nil
}
