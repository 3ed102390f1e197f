package launcher

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// The files the launcher makes have the modes mongod and a careful operator need, and the
// member certificate chains to the CA for both of its uses.
func TestSecretFilesAndCertificates(t *testing.T) {
	dir := t.TempDir()
	k := KeysIn(dir)
	if err := k.make("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		want os.FileMode
	}{{k.KeyFile, 0o400}, {filepath.Dir(k.CAFile), 0o700}, {k.CertKeyFile, 0o600}} {
		if got := mode(t, c.path); got != c.want {
			t.Errorf("%s: mode %04o, want %04o", c.path, got, c.want)
		}
	}
	key, err := os.ReadFile(k.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.TrimSpace(string(key))); n < 6 || n > 1024 {
		t.Errorf("keyFile holds %d characters, mongod wants 6 to 1024", n)
	}
	// A second make keeps every file: a set restarts with its keys.
	if err := k.make("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(k.KeyFile); string(again) != string(key) {
		t.Error("a second make rewrote the keyFile")
	}

	caPEM, err := os.ReadFile(k.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate in ca.pem")
	}
	pair, err := os.ReadFile(k.CertKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	var cert *x509.Certificate
	var sawKey bool
	for b, rest := pem.Decode(pair); b != nil; b, rest = pem.Decode(rest) {
		switch b.Type {
		case "CERTIFICATE":
			if cert, err = x509.ParseCertificate(b.Bytes); err != nil {
				t.Fatal(err)
			}
		case "PRIVATE KEY":
			_, err = x509.ParsePKCS8PrivateKey(b.Bytes)
			sawKey = err == nil
		}
	}
	if cert == nil || !sawKey {
		t.Fatalf("server.pem: certificate %v, key %v; want both", cert != nil, sawKey)
	}
	if !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.IPv4(127, 0, 0, 1)) }) || !slices.Contains(cert.DNSNames, "localhost") {
		t.Errorf("member certificate names %v %v, want 127.0.0.1 and localhost", cert.IPAddresses, cert.DNSNames)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
			if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: host, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
				t.Errorf("member certificate for %s, usage %v: %v", host, use, err)
			}
		}
	}
}

// A password file is made 0600 in a 0700 directory, kept when it exists, and refused when
// group or others may read it.
func TestPasswordFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users", "shardmart_shop.password")
	if err := MakePasswordFile(path); err != nil {
		t.Fatal(err)
	}
	if got := mode(t, path); got != 0o600 {
		t.Errorf("password file mode %04o, want 0600", got)
	}
	if got := mode(t, filepath.Dir(path)); got != 0o700 {
		t.Errorf("users/ mode %04o, want 0700", got)
	}
	pw, err := ReadPasswordFile(path)
	if err != nil || len(pw) < 20 {
		t.Fatalf("ReadPasswordFile = %q, %v; want a 24-character password", pw, err)
	}
	if err := MakePasswordFile(path); err != nil {
		t.Fatal(err)
	}
	if again, _ := ReadPasswordFile(path); again != pw {
		t.Error("a second MakePasswordFile changed the password")
	}
	if err := os.Chmod(path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPasswordFile(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("a 0640 password file: %v; want it refused", err)
	}
	if err := MakeSecretFile(path+"2", 0o644, 8, func(b []byte) string { return "x" }); err == nil {
		t.Error("MakeSecretFile took mode 0644")
	}
}

// A CA path with the characters a query string gives meaning to reaches the driver intact.
func TestURICarriesTheCAPathIntact(t *testing.T) {
	ca := "/tmp/my keys/c+a&b%20#1?.pem"
	s, err := New(Options{Dir: t.TempDir(), Security: Security{TLS: true, CAFile: ca, CertKeyFile: ca + ".key"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, uri := range []string{s.URI(), s.MemberURI(0)} {
		cs, err := connstring.Parse(uri)
		if err != nil || cs.SSLCaFile != ca {
			t.Errorf("%s: driver reads tlsCAFile %q (%v), want %q", uri, cs.SSLCaFile, err, ca)
		}
	}
}
