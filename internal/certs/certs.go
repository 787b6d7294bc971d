// Package certs makes the ECDSA keys and X.509 certificates of the development stacks
// (devstack's NATS TLS, kubestack's cluster PKI) and writes them as PEM files.
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"time"
)

// Validity is long enough that a state directory kept between runs never sees its
// certificates expire.
const Validity = 10 * 365 * 24 * time.Hour

// NewKey makes an ECDSA P-256 key: quick to generate, and accepted for TLS and for
// signing Kubernetes service-account tokens (ES256).
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	return k, nil
}

// Sign fills tmpl's serial number and validity (from an hour ago, to tolerate a little
// clock skew, for Validity) and returns the DER certificate for pub signed by parent's
// key. A CA signs itself with tmpl as parent.
func Sign(tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = tmpl.NotBefore.Add(Validity)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return der, nil
}

// NewCA makes a CA key and a self-signed CA certificate for it; the certificate is
// returned both parsed (to sign with) and as DER (to write).
func NewCA(tmpl *x509.Certificate) (*x509.Certificate, []byte, *ecdsa.PrivateKey, error) {
	key, err := NewKey()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	der, err := Sign(tmpl, key.Public(), tmpl, key)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return ca, der, key, nil
}

// CertPEM is a DER certificate in PEM form.
func CertPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// WriteCert writes a DER certificate to path as PEM, readable by all (0644).
func WriteCert(path string, der []byte) error {
	return os.WriteFile(path, CertPEM(der), 0o644)
}

// KeyPEM is key in PKCS #8 PEM form.
func KeyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// WriteKey writes key to path in PKCS #8 PEM form, readable by the owner only (0600).
func WriteKey(path string, key *ecdsa.PrivateKey) error {
	b, err := KeyPEM(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
