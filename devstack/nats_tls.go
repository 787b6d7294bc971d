package devstack

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/opendlc/opendlc/internal/certs"
)

// Files of NATSOptions.TLS, in Dir/tls.
const (
	natsCAFile   = "ca.pem"
	natsCertFile = "server.pem"
	natsKeyFile  = "server-key.pem"
)

// natsTLS returns the server's TLS configuration and the CA file clients trust. The CA
// and a server certificate for 127.0.0.1, ::1 and localhost are generated into dir on
// first start (keys mode 0600) and reused afterwards, so clients configured with the
// CA keep working across restarts.
func natsTLS(dir string) (*tls.Config, string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("devstack: nats tls: %w", err)
	}
	caPath, certPath, keyPath := filepath.Join(dir, natsCAFile), filepath.Join(dir, natsCertFile), filepath.Join(dir, natsKeyFile)
	if _, err := os.Stat(keyPath); errors.Is(err, os.ErrNotExist) {
		if err := generateNATSCerts(caPath, certPath, keyPath); err != nil {
			return nil, "", fmt.Errorf("devstack: nats tls: %w", err)
		}
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, "", fmt.Errorf("devstack: nats tls: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, caPath, nil
}

// generateNATSCerts writes a new CA and a loopback server certificate signed by it.
func generateNATSCerts(caPath, certPath, keyPath string) error {
	ca, caDER, caKey, err := certs.NewCA(&x509.Certificate{
		Subject:        pkix.Name{CommonName: "OpenDLC development NATS CA"},
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		MaxPathLenZero: true,
	})
	if err != nil {
		return err
	}
	key, err := certs.NewKey()
	if err != nil {
		return err
	}
	der, err := certs.Sign(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "opendlc-dev NATS"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}, key.Public(), ca, caKey)
	if err != nil {
		return err
	}
	keyPEM, err := certs.KeyPEM(key)
	if err != nil {
		return err
	}
	if err := certs.WriteCert(caPath, caDER); err != nil {
		return err
	}
	if err := certs.WriteCert(certPath, der); err != nil {
		return err
	}
	// Public, but in the state directory, whose files are its user's alone.
	for _, p := range []string{caPath, certPath} {
		if err := os.Chmod(p, 0o600); err != nil {
			return err
		}
	}
	// The key goes last: its presence marks a complete set.
	return writePrivate(keyPath, keyPEM)
}
