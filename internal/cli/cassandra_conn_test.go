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
