package launcher

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/shardmart/shardmart/internal/serverproc"
)

// DefaultVersion is the Apache Cassandra release the launcher runs.
const DefaultVersion = "5.0.8"

// ErrPrerequisite means Java 17 or Maven is missing; the message says how to install it.
var ErrPrerequisite = errors.New("cassandra prerequisites missing")

// DefaultCacheDir is where jars are cached: $SHARDMART_CACHE_DIR, else the user cache dir
// (~/.cache/shardmart), outside the repository so a fresh clone reuses it.
func DefaultCacheDir() string { return serverproc.CacheDir() }

// CheckPrerequisites fails with ErrPrerequisite when java (17+) or mvn is not on PATH.
func CheckPrerequisites(ctx context.Context) error {
	const how = "install them with: apt-get update && apt-get install -y openjdk-17-jre-headless maven (.ci/run does this)"
	for _, bin := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%w: %s not found on PATH; %s", ErrPrerequisite, bin, how)
		}
	}
	out, err := exec.CommandContext(ctx, "java", "-version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: java -version: %v: %s", ErrPrerequisite, err, out)
	}
	v, ok := javaMajor(string(out))
	if !ok || v < 17 {
		return fmt.Errorf("%w: Cassandra 5.0 needs Java 17, java -version says %q; %s", ErrPrerequisite, firstLine(string(out)), how)
	}
	return nil
}

// javaMajor parses the major version from `java -version` output (`version "17.0.15"`).
func javaMajor(out string) (int, bool) {
	i := strings.Index(out, `version "`)
	if i < 0 {
		return 0, false
	}
	n := 0
	for _, c := range out[i+len(`version "`):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	if n == 1 { // "1.8.0" style
		return 8, true
	}
	return n, n > 0
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

const pomTemplate = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shardmart</groupId>
  <artifactId>cassandra-server-jars</artifactId>
  <version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.cassandra</groupId>
      <artifactId>cassandra-all</artifactId>
      <version>%s</version>
    </dependency>
  </dependencies>
</project>
`

// EnsureJars returns a directory holding cassandra-all and its runtime dependencies, fetching them
// from Maven Central with `mvn dependency:copy-dependencies` on first use. A file lock makes
// concurrent callers (parallel test packages) fetch once.
func EnsureJars(ctx context.Context, cacheDir, version string) (string, error) {
	return EnsureMavenJars(ctx, filepath.Join(cacheDir, "cassandra-"+version), fmt.Sprintf(pomTemplate, version), "cassandra-all "+version, nil)
}

// EnsureMavenJars fetches pom's runtime dependencies into base/lib once (mvn -C: Maven Central's
// checksums must match), runs check on the fresh lib, and marks base complete.
func EnsureMavenJars(ctx context.Context, base, pom, what string, check func(lib string) error) (string, error) {
	lib := filepath.Join(base, "lib")
	done := filepath.Join(base, "complete")
	if _, err := os.Stat(done); err == nil {
		return lib, nil
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", fmt.Errorf("jar cache: %w", err)
	}
	unlock, err := serverproc.Lock(ctx, filepath.Join(base, ".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(done); err == nil {
		return lib, nil
	}
	if err := CheckPrerequisites(ctx); err != nil {
		return "", err
	}
	pomPath := filepath.Join(base, "pom.xml")
	if err := os.WriteFile(pomPath, []byte(pom), 0o644); err != nil {
		return "", fmt.Errorf("jar cache: %w", err)
	}
	tmp := lib + ".tmp"
	_ = os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "mvn", "-q", "-B", "-C", "-f", pomPath,
		"dependency:copy-dependencies", "-DincludeScope=runtime", "-DoutputDirectory="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fetch %s from Maven Central: %w\n%s", what, err, out)
	}
	if check != nil {
		if err := check(tmp); err != nil {
			return "", fmt.Errorf("fetch %s: %w", what, err)
		}
	}
	_ = os.RemoveAll(lib)
	if err := os.Rename(tmp, lib); err != nil {
		return "", fmt.Errorf("jar cache: %w", err)
	}
	if err := os.WriteFile(done, []byte(what+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("jar cache: %w", err)
	}
	return lib, nil
}
