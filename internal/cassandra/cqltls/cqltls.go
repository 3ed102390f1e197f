// Package cqltls builds a CQL client's login and TLS settings from PEM files: one place for the
// store's connections and the launcher's own sessions.
package cqltls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

// Files are PEM files; TLS is on when CAFile is set.
type Files struct {
	CAFile   string // the CA that signed the nodes' certificates
	CertFile string // client certificate, for clusters that require one (mTLS)
	KeyFile  string
	// SkipHostVerification accepts a certificate signed by the CA for another host name or
	// address; the chain is still verified.
	SkipHostVerification bool
}

// Enabled tells whether TLS is asked for.
func (f Files) Enabled() bool { return f.CAFile != "" }

// Config is the Go TLS configuration of the files; nil when TLS is off.
func (f Files) Config() (*tls.Config, error) {
	if !f.Enabled() {
		if f.CertFile != "" || f.KeyFile != "" {
			return nil, errors.New("cassandra TLS: a client certificate needs the CA file too (--cassandra-tls-ca)")
		}
		return nil, nil
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("cassandra TLS: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("cassandra TLS: CA file %s holds no PEM certificate", f.CAFile)
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if (f.CertFile == "") != (f.KeyFile == "") {
		return nil, errors.New("cassandra TLS: give both the client certificate and its key (--cassandra-tls-cert, --cassandra-tls-key)")
	}
	if f.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cassandra TLS: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	if f.SkipHostVerification {
		// Verify the chain ourselves, without the name: InsecureSkipVerify alone would accept any
		// certificate at all.
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no server certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		}
	}
	return c, nil
}

// Apply sets a PasswordAuthenticator login (none when username is empty) and the TLS of files
// on a driver configuration.
func Apply(c *gocql.ClusterConfig, username, password string, files Files) error {
	if username != "" {
		c.Authenticator = gocql.PasswordAuthenticator{Username: username, Password: password}
	} else if password != "" {
		return errors.New("cassandra: a password without a user name (--cassandra-user)")
	}
	t, err := files.Config()
	if err != nil {
		return err
	}
	if t != nil {
		c.SslOpts = &gocql.SslOptions{Config: t, EnableHostVerification: !files.SkipHostVerification}
	}
	return nil
}
