package launcher

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TLSFiles are the PEM files of a cluster with client TLS: what its nodes present and trust,
// and what a client needs.
type TLSFiles struct {
	// Keystore is the nodes' private key (unencrypted PKCS#8) followed by their certificate
	// chain, the format of Cassandra's PEMBasedSslContextFactory.
	Keystore string
	// CA is the certificate that signed the nodes' (and the clients') certificates: the nodes'
	// truststore and the clients' --cassandra-tls-ca.
	CA string
	// ClientCert and ClientKey are a client certificate signed by CA, for clusters that
	// require one (mTLS); empty for a user's own files.
	ClientCert, ClientKey string
}

// CA is a certificate authority made for tests: it signs node and client certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// CertFile is its certificate, PEM.
	CertFile string
}

// NewCA makes a CA and writes its certificate to dir/ca.pem (its key stays in memory: a test CA
// signs at once or never).
func NewCA(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"shardmart test"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{cert: cert, key: key, CertFile: filepath.Join(dir, "ca.pem")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	if err := os.WriteFile(ca.CertFile, pemBlock("CERTIFICATE", der), 0o644); err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return ca, nil
}

// Issue signs a certificate for name (and the given IP addresses) and returns its PEM
// certificate and unencrypted PKCS#8 key.
func (ca *CA) Issue(name string, ips []net.IP, client bool) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: %w", err)
	}
	usage := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if client {
		usage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"shardmart test"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().AddDate(5, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  usage,
		IPAddresses:  ips,
	}
	if !client {
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: %w", err)
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("tls: %w", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", pk), nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// generatedTLS writes, once per cluster directory, a CA, one node certificate naming every
// node's address (so clients can verify the host), and a client certificate; a restart reuses
// them, so clients keep trusting the cluster.
func generatedTLS(dir string, nodes []Node) (TLSFiles, error) {
	d := filepath.Join(dir, "tls")
	f := TLSFiles{Keystore: filepath.Join(d, "node-keystore.pem"), CA: filepath.Join(d, "ca.pem"),
		ClientCert: filepath.Join(d, "client.pem"), ClientKey: filepath.Join(d, "client-key.pem")}
	if _, err := os.Stat(f.ClientKey); err == nil {
		return f, nil
	}
	ca, err := NewCA(d, "shardmart test CA")
	if err != nil {
		return f, err
	}
	var ips []net.IP
	for _, n := range nodes {
		ips = append(ips, net.ParseIP(n.Addr))
	}
	cert, key, err := ca.Issue("shardmart cassandra node", ips, false)
	if err != nil {
		return f, err
	}
	caPEM, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return f, fmt.Errorf("tls: %w", err)
	}
	if err := os.WriteFile(f.Keystore, append(append(key, cert...), caPEM...), 0o600); err != nil {
		return f, fmt.Errorf("tls: %w", err)
	}
	ccert, ckey, err := ca.Issue("shardmart client", nil, true)
	if err != nil {
		return f, err
	}
	if err := os.WriteFile(f.ClientCert, ccert, 0o644); err != nil {
		return f, fmt.Errorf("tls: %w", err)
	}
	// Written last: its presence says the set is complete.
	if err := os.WriteFile(f.ClientKey, ckey, 0o600); err != nil {
		return f, fmt.Errorf("tls: %w", err)
	}
	return f, nil
}
