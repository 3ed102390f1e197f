package launcher

import (
	"context"
	_ "embed"
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
	classes string // where LoadTables.class is, for TablesCommand
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
	classes := filepath.Join(workDir, "classes")
	cls := filepath.Join(classes, "org", "apache", "cassandra", "tools", "LoadTables.class")
	if err := os.MkdirAll(filepath.Dir(cls), 0o755); err != nil {
		return nil, fmt.Errorf("sstableloader: %w", err)
	}
	if err := os.WriteFile(cls, loadTablesClass, 0o644); err != nil {
		return nil, fmt.Errorf("sstableloader: %w", err)
	}
	l := &SSTableLoader{cp: cp, classes: classes, workDir: workDir}
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

// loadTablesClass is loadtables/LoadTables.java compiled (see there): BulkLoader.load over
// several tables in one JVM.
//
//go:embed loadtables/org/apache/cassandra/tools/LoadTables.class
var loadTablesClass []byte

// Command is `sstableloader args...`, e.g. -d host1,host2 -k keyspace -tb table <dir>.
func (l *SSTableLoader) Command(ctx context.Context, args ...string) *exec.Cmd {
	return l.java(ctx, l.cp, "org.apache.cassandra.tools.BulkLoader", args)
}

// TablesCommand loads several tables in one JVM: opts are sstableloader's options without -tb
// and the directory, dirs the tables' directories, each named after its table. It prints
// "loaded <table>" on standard output after each, and stops at the first failure.
func (l *SSTableLoader) TablesCommand(ctx context.Context, opts, dirs []string) *exec.Cmd {
	args := append(append(append([]string(nil), opts...), "--"), dirs...)
	// The class after the jars: class-data sharing wants the archive's class path as the prefix.
	return l.java(ctx, l.cp+string(os.PathListSeparator)+l.classes, "org.apache.cassandra.tools.LoadTables", args)
}

func (l *SSTableLoader) java(ctx context.Context, cp, main string, args []string) *exec.Cmd {
	jargs := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	jargs = append(jargs, l.cds...)
	jargs = append(jargs, jvm17Options...)
	jargs = append(jargs,
		"-Dlogback.configurationFile="+filepath.Join(l.workDir, "logback-tools.xml"),
		"-Dcassandra.logdir="+l.workDir,
		"-Duser.home="+l.workDir,
		"-cp", cp, main,
	)
	cmd := exec.CommandContext(ctx, "java", append(jargs, args...)...)
	cmd.Dir = l.workDir
	return cmd
}
