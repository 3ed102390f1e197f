package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestCassandraPasswordFromFileOrEnvironmentOnly(t *testing.T) {
	f := pflag.NewFlagSet("x", pflag.ContinueOnError)
	var c cassandraConnFlags
	c.register(f)
	if f.Lookup("cassandra-password") != nil {
		t.Fatal("a --cassandra-password flag exists: the password would show in ps")
	}
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	t.Setenv(passwordEnv, "from-env")
	if err := f.Parse([]string{"--cassandra-user", "shop", "--cassandra-local-dc", "dc2", "--cassandra-tls-ca", "/ca.pem"}); err != nil {
		t.Fatal(err)
	}
	cn, err := c.connection()
	if err != nil || cn.Password != "from-env" || cn.Username != "shop" || cn.Datacenter != "dc2" || cn.TLS.CAFile != "/ca.pem" {
		t.Errorf("from the environment: %+v, %v", cn, err)
	}
	if err := f.Parse([]string{"--cassandra-password-file", file}); err != nil {
		t.Fatal(err)
	}
	if cn, err := c.connection(); err != nil || cn.Password != "from-file" {
		t.Errorf("from the file: %q, %v; want from-file (the file wins, newline trimmed)", cn.Password, err)
	}
	t.Setenv(passwordEnv, "")
	c.passwordFile = ""
	if _, err := c.connection(); err == nil || !strings.Contains(err.Error(), "no password") {
		t.Errorf("a user without a password: %v", err)
	}
	c.passwordFile = filepath.Join(t.TempDir(), "missing")
	if _, err := c.connection(); err == nil || !strings.Contains(err.Error(), "--cassandra-password-file") {
		t.Errorf("a missing password file: %v", err)
	}
}

func TestCassandraSecretsReadableByOthersAreNamed(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return p
	}
	c := cassandraConnFlags{passwordFile: write("pw", 0o644)}
	c.tls.KeyFile = write("key.pem", 0o640)
	if got := c.exposedFiles(); len(got) != 2 || got[0] != c.passwordFile || got[1] != c.tls.KeyFile {
		t.Errorf("group/world-readable files: %v, want both", got)
	}
	c = cassandraConnFlags{passwordFile: write("pw-private", 0o600)}
	c.tls.KeyFile = write("key-private.pem", 0o400)
	if got := c.exposedFiles(); len(got) != 0 {
		t.Errorf("owner-only files: %v, want none", got)
	}
}
