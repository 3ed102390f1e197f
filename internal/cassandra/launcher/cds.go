package launcher

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// Class-data sharing (AppCDS): a node's boot, and every nodetool run, spends most of its CPU
// loading, parsing and verifying the same ~10,000 classes. A static archive of them, made
// once per machine, is mapped instead. It changes no setting Cassandra sees: only how the
// JVM gets its classes. A missing or unusable archive costs speed only (-Xshare:auto).

// cdsEnv set to "off" starts the JVMs without the archive (A/B measurements, a suspect JVM).
const cdsEnv = "SHARDMART_CASSANDRA_CDS"

// cdsArchives are the archive files in use; empty when class-data sharing is off.
type cdsArchives struct{ server, nodetool string }

// jarClasspath is the explicit, sorted jar list of lib. CDS accepts an archive only if the
// runtime class path starts with the dump-time one, so servers, nodetool and the dump all use
// this string instead of lib/* (whose expansion order is the directory's).
func jarClasspath(lib string) (string, error) {
	jars, err := filepath.Glob(filepath.Join(lib, "*.jar"))
	if err != nil || len(jars) == 0 {
		return "", fmt.Errorf("jar cache %s: no jars (delete the directory to fetch again)", lib)
	}
	sort.Strings(jars)
	return strings.Join(jars, string(os.PathListSeparator)), nil
}

// javaKey names the JVM an archive belongs to: archives only map into the exact JVM build
// that wrote them.
func javaKey(ctx context.Context) (string, error) {
	path, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("java: %w", err)
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	out, err := exec.CommandContext(ctx, path, "-version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("java -version: %w: %s", err, out)
	}
	sum := sha256.Sum256(append([]byte(path+"\n"), out...))
	return hex.EncodeToString(sum[:6]), nil
}

// EnsureCDS returns the class-data sharing archives of Cassandra version for the java on
// PATH, making them on first use next to the jars (cassandra-<version>/cds-<java>/): a
// one-node training cluster on CDSTrainAddr boots, takes a schema change, a write and a read,
// answers nodetool and stops, while the JVMs list the classes they load; `java -Xshare:dump`
// then archives those. A file lock makes concurrent callers train once. A failed attempt is
// remembered (file "failed") so starts do not retrain each time; retry clears it.
func EnsureCDS(ctx context.Context, cacheDir, version string, retry bool, log *slog.Logger) (server, nodetool string, err error) {
	a, err := ensureCDS(ctx, cacheDir, version, CDSTrainAddr, retry, log)
	return a.server, a.nodetool, err
}

func ensureCDS(ctx context.Context, cacheDir, version, trainAddr string, retry bool, log *slog.Logger) (cdsArchives, error) {
	lib, err := EnsureJars(ctx, cacheDir, version)
	if err != nil {
		return cdsArchives{}, err
	}
	key, err := javaKey(ctx)
	if err != nil {
		return cdsArchives{}, err
	}
	dir := filepath.Join(filepath.Dir(lib), "cds-"+key)
	a := cdsArchives{server: filepath.Join(dir, "server.jsa"), nodetool: filepath.Join(dir, "nodetool.jsa")}
	done, failed := filepath.Join(dir, "complete"), filepath.Join(dir, "failed")
	check := func() (bool, error) {
		if _, err := os.Stat(done); err == nil {
			return true, nil
		}
		if b, err := os.ReadFile(failed); err == nil && !retry {
			return true, fmt.Errorf("an earlier attempt failed (`shardmart cassandra fetch` retries): %s", strings.TrimSpace(string(b)))
		}
		return false, nil
	}
	if ok, err := check(); ok {
		return a, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cdsArchives{}, fmt.Errorf("cds archive: %w", err)
	}
	unlock, err := serverproc.Lock(ctx, filepath.Join(dir, ".lock"))
	if err != nil {
		return cdsArchives{}, err
	}
	defer unlock()
	if ok, err := check(); ok {
		return a, err
	}
	_ = os.Remove(failed)
	log.Info("making the cassandra class-data sharing archive (once per machine)", "dir", dir)
	if err := trainCDS(ctx, cacheDir, version, trainAddr, a, log); err != nil {
		if ctx.Err() == nil {
			_ = os.WriteFile(failed, []byte(err.Error()+"\n"), 0o644)
		}
		return cdsArchives{}, err
	}
	if err := os.WriteFile(done, []byte("cassandra "+version+"\n"), 0o644); err != nil {
		return cdsArchives{}, fmt.Errorf("cds archive: %w", err)
	}
	return a, nil
}

// trainCDS records the classes a node and nodetool load, then dumps and checks both archives.
// The dumps take the class path the training node ran with, as every later JVM does.
func trainCDS(ctx context.Context, cacheDir, version, addr string, a cdsArchives, log *slog.Logger) error {
	tmp, err := os.MkdirTemp(filepath.Dir(a.server), "train-")
	if err != nil {
		return fmt.Errorf("cds training: %w", err)
	}
	defer os.RemoveAll(tmp)
	c, err := New(Options{Dir: filepath.Join(tmp, "cluster"), BaseAddr: addr, Name: "cds-training",
		Version: version, CacheDir: cacheDir, DieWithParent: true, Logger: log})
	if err != nil {
		return err
	}
	c.classList = tmp
	defer c.KillAll()
	if err := c.Up(ctx); err != nil {
		return fmt.Errorf("cds training node: %w", err)
	}
	if err := c.onLiveNode(ctx, func(s *gocql.Session) error {
		for _, q := range []string{
			`CREATE KEYSPACE IF NOT EXISTS cds WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}`,
			`CREATE TABLE IF NOT EXISTS cds.t (k text PRIMARY KEY, v int)`,
			`INSERT INTO cds.t (k, v) VALUES ('a', 1)`,
			`SELECT v FROM cds.t WHERE k = 'a'`,
		} {
			if err := s.Query(q).WithContext(ctx).Exec(); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("cds training queries: %w", err)
	}
	// A clean stop writes the server's class list out.
	if err := c.StopNode(ctx, 0); err != nil {
		return fmt.Errorf("cds training node: %w", err)
	}
	for _, d := range []struct{ list, archive, gc string }{
		{filepath.Join(tmp, "server.lst"), a.server, "-XX:+UseG1GC"},
		{filepath.Join(tmp, "nodetool.lst"), a.nodetool, "-XX:+UseSerialGC"},
	} {
		if err := dumpCDS(ctx, d.list, d.archive, d.gc, c.cp); err != nil {
			return err
		}
	}
	return nil
}

// dumpCDS archives the classes of list into archive (temp file, checked, then renamed).
func dumpCDS(ctx context.Context, list, archive, gc, cp string) error {
	if st, err := os.Stat(list); err != nil || st.Size() == 0 {
		return fmt.Errorf("cds training: no class list %s: %v", list, err)
	}
	tmp := archive + ".tmp"
	_ = os.Remove(tmp)
	out, err := exec.CommandContext(ctx, "java", "-Xshare:dump", "-XX:SharedClassListFile="+list,
		"-XX:SharedArchiveFile="+tmp, gc, "-cp", cp).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cds dump %s: %w: %s", filepath.Base(archive), err, lastLine(string(out)))
	}
	// -Xshare:on refuses to start rather than run without the archive: proof it maps.
	if out, err := exec.CommandContext(ctx, "java", "-Xshare:on", "-XX:SharedArchiveFile="+tmp, gc, "-cp", cp, "-version").CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cds archive %s does not map: %w: %s", filepath.Base(archive), err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, archive); err != nil {
		return fmt.Errorf("cds archive: %w", err)
	}
	return nil
}

// useCDS finds (making it if need be) the archives for c and logs whether they are used;
// any failure leaves class-data sharing off and the start goes on.
func (c *Cluster) useCDS(ctx context.Context) cdsArchives {
	if c.classList != "" {
		return cdsArchives{}
	}
	if v := os.Getenv(cdsEnv); strings.EqualFold(v, "off") {
		c.opts.Logger.Info("cassandra class-data sharing off", "reason", cdsEnv+"="+v)
		return cdsArchives{}
	}
	a, err := ensureCDS(ctx, c.opts.CacheDir, c.opts.Version, CDSTrainAddr, false, c.opts.Logger)
	if err != nil {
		if errors.Is(err, ctx.Err()) {
			return cdsArchives{}
		}
		c.opts.Logger.Warn("cassandra class-data sharing off: JVMs start slower", "reason", err)
		return cdsArchives{}
	}
	c.opts.Logger.Info("cassandra class-data sharing on", "archive", a.server)
	return a
}

// cdsArgs are the JVM flags that map archive, or record the loaded classes during training.
func (c *Cluster) cdsArgs(archive, list string) []string {
	if c.classList != "" {
		return []string{"-XX:DumpLoadedClassList=" + filepath.Join(c.classList, list)}
	}
	if archive == "" {
		return nil
	}
	return []string{"-Xshare:auto", "-XX:SharedArchiveFile=" + archive}
}
