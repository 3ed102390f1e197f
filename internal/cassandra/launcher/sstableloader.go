package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SSTableLoader runs Cassandra's sstableloader (org.apache.cassandra.tools.BulkLoader) from the
// server jars of a version, as a JVM per call like nodetool: no Cassandra install is needed
// on the machine that streams, only Java 17 and the jar cache (fetched on first use).
type SSTableLoader struct {
	cp      string
	cds     []string
	workDir string
}

// NewSSTableLoader fetches the jars of version (default DefaultVersion) into cacheDir
// (default DefaultCacheDir()) if need be and writes the tool's logging configuration into
// workDir. Class-data sharing reuses nodetool's archive when there is one.
func NewSSTableLoader(ctx context.Context, cacheDir, version, workDir string) (*SSTableLoader, error) {
	if cacheDir == "" {
		cacheDir = DefaultCacheDir()
	}
	if version == "" {
		version = DefaultVersion
	}
	if err := CheckPrerequisites(ctx); err != nil {
		return nil, err
	}
	lib, err := EnsureJars(ctx, cacheDir, version)
	if err != nil {
		return nil, err
	}
	cp, err := jarClasspath(lib)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(workDir, "logback-tools.xml"), []byte(toolsLogbackXML), 0o644); err != nil {
		return nil, fmt.Errorf("sstableloader: %w", err)
	}
	l := &SSTableLoader{cp: cp, workDir: workDir}
	if !strings.EqualFold(os.Getenv(cdsEnv), "off") {
		// nodetool's archive, dumped with this class path as its prefix, when a cluster start
		// made it already: a restore never trains one, and without it the JVMs start slower.
		if key, err := javaKey(ctx); err == nil {
			dir := filepath.Join(filepath.Dir(lib), "cds-"+key)
			if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
				l.cds = []string{"-Xshare:auto", "-XX:SharedArchiveFile=" + filepath.Join(dir, "nodetool.jsa")}
			}
		}
	}
	return l, nil
}

// Command is `sstableloader args...`, e.g. -d host1,host2 -k keyspace -tb table <dir>.
func (l *SSTableLoader) Command(ctx context.Context, args ...string) *exec.Cmd {
	jargs := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	jargs = append(jargs, l.cds...)
	jargs = append(jargs, jvm17Options...)
	jargs = append(jargs,
		"-Dlogback.configurationFile="+filepath.Join(l.workDir, "logback-tools.xml"),
		"-Dcassandra.logdir="+l.workDir,
		"-Duser.home="+l.workDir,
		"-cp", l.cp,
		"org.apache.cassandra.tools.BulkLoader",
	)
	cmd := exec.CommandContext(ctx, "java", append(jargs, args...)...)
	cmd.Dir = l.workDir
	return cmd
}
