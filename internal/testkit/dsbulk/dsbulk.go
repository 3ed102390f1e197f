// Package dsbulk fetches the DataStax Bulk Loader the migration benchmark measures the
// backfill against, from its modules on Maven Central, and runs it.
package dsbulk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/shardmart/shardmart/internal/cassandra/launcher"
)

// Version is the DataStax Bulk Loader the migration benchmark compares against. Maven
// Central has no dsbulk-distribution archive, only its modules: Ensure fetches the
// runner, the load workflow, the CSV connector and the reactor executor and batcher, as the
// distribution bundles them, plus logback for its logging.
const Version = "1.10.0"

// dsbulkJarsSHA256 pins the fetched jar set: the SHA-256 of its manifest (one
// "<sha256 of jar>  <name>" line per jar, sorted by name). Manifest computes it.
const dsbulkJarsSHA256 = "6c0a8032c07dcf7048267f69961c06734b5c1fbe1c4c8b4821c7a57215df72d4"

const dsbulkPom = `<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>shardmart</groupId>
  <artifactId>dsbulk-jars</artifactId>
  <version>1</version>
  <dependencies>
%s    <dependency><groupId>ch.qos.logback</groupId><artifactId>logback-classic</artifactId><version>1.2.13</version></dependency>
  </dependencies>
</project>
`

// Ensure returns a directory holding DSBulk's jars, fetched from Maven Central on first
// use and checked against dsbulkJarsSHA256.
func Ensure(ctx context.Context, cacheDir string) (string, error) {
	var deps strings.Builder
	for _, a := range []string{"dsbulk-runner", "dsbulk-workflow-load", "dsbulk-connectors-csv", "dsbulk-executor-reactor", "dsbulk-batcher-reactor"} {
		fmt.Fprintf(&deps, "    <dependency><groupId>com.datastax.oss</groupId><artifactId>%s</artifactId><version>%s</version></dependency>\n", a, Version)
	}
	return launcher.EnsureMavenJars(ctx, filepath.Join(cacheDir, "dsbulk-"+Version), fmt.Sprintf(dsbulkPom, deps.String()), "dsbulk "+Version,
		func(lib string) error {
			sum, err := Manifest(lib)
			if err != nil {
				return err
			}
			if sum != dsbulkJarsSHA256 {
				return fmt.Errorf("jar set SHA-256 %s, want %s", sum, dsbulkJarsSHA256)
			}
			return nil
		})
}

// Manifest is the SHA-256 of lib's jar manifest (see dsbulkJarsSHA256).
func Manifest(lib string) (string, error) {
	names, err := filepath.Glob(filepath.Join(lib, "*.jar"))
	if err != nil {
		return "", fmt.Errorf("dsbulk manifest: %w", err)
	}
	sort.Strings(names)
	var m strings.Builder
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return "", fmt.Errorf("dsbulk manifest: %w", err)
		}
		h := sha256.Sum256(b)
		fmt.Fprintf(&m, "%s  %s\n", hex.EncodeToString(h[:]), filepath.Base(n))
	}
	h := sha256.Sum256([]byte(m.String()))
	return hex.EncodeToString(h[:]), nil
}

// Command runs DSBulk from the jars in lib with args (e.g. "load", "-k", ks, ...).
func Command(ctx context.Context, lib string, args ...string) *exec.Cmd {
	a := append([]string{"-cp", filepath.Join(lib, "*"), "com.datastax.oss.dsbulk.runner.DataStaxBulkLoader"}, args...)
	return exec.CommandContext(ctx, "java", a...)
}
