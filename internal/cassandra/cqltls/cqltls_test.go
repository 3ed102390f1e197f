package cqltls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func issue(t *testing.T, parent *authority, serial int64, name string, ca bool) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: ca, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{name},
	}
	if ca {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &authority{cert: cert, key: key}
}

// A node certificate issued by an intermediate CA for another host name is accepted with
// SkipHostVerification when the node sends the intermediate, and refused when it is signed by
// a CA the client does not trust.
func TestSkipHostVerificationChecksTheChainThroughIntermediates(t *testing.T) {
	root := issue(t, nil, 1, "root", true)
	inter := issue(t, root, 2, "intermediate", true)
	leaf := issue(t, inter, 3, "node.elsewhere", false)
	stranger := issue(t, nil, 4, "stranger", true)
	strangerLeaf := issue(t, stranger, 5, "node.elsewhere", false)

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: root.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Files{CAFile: caFile, SkipHostVerification: true}.Config()
	if err != nil {
		t.Fatal(err)
	}
	serve := func(chain ...*authority) error {
		srvCert := tls.Certificate{PrivateKey: chain[0].key, Leaf: chain[0].cert}
		for _, c := range chain {
			srvCert.Certificate = append(srvCert.Certificate, c.cert.Raw)
		}
		// A loopback socket, not net.Pipe: TLS 1.3 writes both ways at once.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_ = tls.Server(conn, &tls.Config{Certificates: []tls.Certificate{srvCert}}).Handshake()
		}()
		client, err := net.DialTimeout("tcp", ln.Addr().String(), 10*time.Second)
		if err != nil {
			return err
		}
		defer client.Close()
		_ = client.SetDeadline(time.Now().Add(10 * time.Second))
		c := cfg.Clone()
		c.ServerName = "127.0.0.1"
		return tls.Client(client, c).Handshake()
	}
	if err := serve(leaf, inter); err != nil {
		t.Errorf("chain through an intermediate: %v", err)
	}
	if err := serve(strangerLeaf); err == nil {
		t.Error("a certificate of an untrusted CA accepted")
	}
}
