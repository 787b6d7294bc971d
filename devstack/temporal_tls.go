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

// Files of a Temporal server's mutual TLS (TemporalOptions.TLS,
// TemporalServerOptions.TLS), in its directory's tls/: the installation's CA, the
// server's certificate (its frontend's and, as both server and client, its services'
// among themselves) and the one client certificate of OpenDLC's processes. The CA's key
// is not kept: no other certificate is ever signed by it.
const (
	temporalCAFile         = "ca.pem"
	temporalServerCertFile = "server.pem"
	temporalServerKeyFile  = "server-key.pem"
	temporalClientCertFile = "client.pem"
	temporalClientKeyFile  = "client-key.pem"
)

// TemporalTLSFiles are the files a client of a Temporal server with mutual TLS needs:
// the CA that signed the server's certificate, and the client certificate and its key
// (mode 0600). `dlc worker` and `dlc server` take them as --temporal-tls-ca,
// --temporal-tls-cert and --temporal-tls-key.
type TemporalTLSFiles struct {
	CAFile, CertFile, KeyFile string
	// ServerName is the name the server's certificate holds besides 127.0.0.1 and ::1.
	ServerName string
}

// temporalServerName is the DNS name in the server's certificate (with 127.0.0.1 and ::1).
const temporalServerName = "localhost"

// temporalTLS makes, on first use, the CA, the server's and the client's certificates
// of a Temporal server in dir (0700; every file 0600), and returns their paths. A
// complete set from an earlier start is reused, so that clients keep working across
// restarts.
func temporalTLS(dir string) (server, client TemporalTLSFiles, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return server, client, fmt.Errorf("devstack: temporal tls: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return server, client, fmt.Errorf("devstack: temporal tls: %w", err)
	}
	ca := filepath.Join(dir, temporalCAFile)
	server = TemporalTLSFiles{CAFile: ca, CertFile: filepath.Join(dir, temporalServerCertFile),
		KeyFile: filepath.Join(dir, temporalServerKeyFile), ServerName: temporalServerName}
	client = TemporalTLSFiles{CAFile: ca, CertFile: filepath.Join(dir, temporalClientCertFile),
		KeyFile: filepath.Join(dir, temporalClientKeyFile), ServerName: temporalServerName}
	// The client's key is written last: its presence marks a complete set.
	if _, err := os.Stat(client.KeyFile); errors.Is(err, os.ErrNotExist) {
		if err := generateTemporalCerts(server, client); err != nil {
			return server, client, fmt.Errorf("devstack: temporal tls: %w", err)
		}
	} else if err != nil {
		return server, client, fmt.Errorf("devstack: temporal tls: %w", err)
	}
	return server, client, nil
}

// generateTemporalCerts writes a new CA, a loopback server certificate (for server and
// client authentication: Temporal's services present it to each other) and a client
// certificate, both signed by the CA.
func generateTemporalCerts(server, client TemporalTLSFiles) error {
	ca, caDER, caKey, err := certs.NewCA(&x509.Certificate{
		Subject:        pkix.Name{CommonName: "OpenDLC development Temporal CA"},
		KeyUsage:       x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		MaxPathLenZero: true,
	})
	if err != nil {
		return err
	}
	if err := writePrivate(server.CAFile, certs.CertPEM(caDER)); err != nil {
		return err
	}
	for _, c := range []struct {
		files TemporalTLSFiles
		tmpl  *x509.Certificate
	}{
		{server, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "opendlc-dev Temporal server"},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
			DNSNames:    []string{temporalServerName},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		}},
		{client, &x509.Certificate{
			Subject:     pkix.Name{CommonName: "opendlc-dev Temporal client"},
			KeyUsage:    x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}},
	} {
		key, err := certs.NewKey()
		if err != nil {
			return err
		}
		der, err := certs.Sign(c.tmpl, key.Public(), ca, caKey)
		if err != nil {
			return err
		}
		keyPEM, err := certs.KeyPEM(key)
		if err != nil {
			return err
		}
		if err := writePrivate(c.files.CertFile, certs.CertPEM(der)); err != nil {
			return err
		}
		if err := writePrivate(c.files.KeyFile, keyPEM); err != nil {
			return err
		}
	}
	return nil
}

// ClientConfig is the client's TLS configuration of the files: its certificate, and
// the CA as the only root.
func (f TemporalTLSFiles) ClientConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("devstack: temporal tls: %w", err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("devstack: temporal tls: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("devstack: temporal tls: no certificate in %s", f.CAFile)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
