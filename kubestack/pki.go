package kubestack

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/opendlc/opendlc/internal/certs"
)

// Identities of the control-plane clients. The scheduler and controller
// manager use the user names the built-in RBAC roles are bound to; the admin
// and kwok are in system:masters.
const (
	adminUser             = "kubestack-admin"
	kwokUser              = "kubestack-kwok"
	schedulerUser         = "system:kube-scheduler"
	controllerManagerUser = "system:kube-controller-manager"
	mastersGroup          = "system:masters"
	// frontProxyUser is the API server's identity towards aggregated API
	// servers (and the scheduler's and controller manager's delegated
	// authentication, which reads the request-header CA); its CA is the
	// cluster CA and the API server accepts only this name from it.
	frontProxyUser = "front-proxy-client"
	// kubeletClientUser is the API server's identity towards the real nodes'
	// kubelets (logs, exec), as kubeadm's apiserver-kubelet-client.
	kubeletClientUser = "kube-apiserver-kubelet-client"
)

// pki holds the paths of the cluster's keys and certificates, all PEM.
type pki struct {
	dir string
	// CA signs the serving and client certificates; the controller manager
	// also signs CSRs with it.
	caCert, caKey string
	// apiserver serving certificate.
	servingCert, servingKey string
	// Service-account token signing key pair.
	saKey, saPub string
}

// clientCert is a client certificate and its key, PEM.
type clientCert struct {
	cert, key string
}

func (p pki) client(user string) clientCert {
	base := filepath.Join(p.dir, "client-"+sanitize(user))
	return clientCert{cert: base + ".crt", key: base + ".key"}
}

// loadOrCreatePKI reuses the files in dir when they are all there, so a
// restart on the same state directory keeps trusting the tokens and
// certificates handed out before; otherwise it generates a fresh set.
func loadOrCreatePKI(dir string) (pki, error) {
	p := pki{
		dir:    dir,
		caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"),
		servingCert: filepath.Join(dir, "apiserver.crt"), servingKey: filepath.Join(dir, "apiserver.key"),
		saKey: filepath.Join(dir, "sa.key"), saPub: filepath.Join(dir, "sa.pub"),
	}
	users := []struct {
		name   string
		groups []string
	}{
		{adminUser, []string{mastersGroup}},
		{kwokUser, []string{mastersGroup}},
		{schedulerUser, nil},
		{controllerManagerUser, nil},
		{frontProxyUser, nil},
		{kubeletClientUser, []string{mastersGroup}},
	}
	all := []string{p.caCert, p.caKey, p.servingCert, p.servingKey, p.saKey, p.saPub}
	for _, u := range users {
		c := p.client(u.name)
		all = append(all, c.cert, c.key)
	}
	complete := true
	for _, f := range all {
		if _, err := os.Stat(f); err != nil {
			complete = false
			break
		}
	}
	if complete {
		return p, nil
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return p, fmt.Errorf("kubestack: %w", err)
	}
	ca, caDER, caKey, err := certs.NewCA(&x509.Certificate{
		Subject:  pkix.Name{CommonName: "kubestack-ca"},
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	})
	if err != nil {
		return p, fmt.Errorf("kubestack: %w", err)
	}
	errs := []error{certs.WriteCert(p.caCert, caDER), certs.WriteKey(p.caKey, caKey)}

	servingKey, err := newKey()
	if err != nil {
		return p, err
	}
	servingDER, err := sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "kube-apiserver"},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback, net.ParseIP(kubernetesServiceIP)},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, servingKey.Public(), ca, caKey)
	if err != nil {
		return p, err
	}
	errs = append(errs, certs.WriteCert(p.servingCert, servingDER), certs.WriteKey(p.servingKey, servingKey))

	for _, u := range users {
		key, err := newKey()
		if err != nil {
			return p, err
		}
		der, err := sign(&x509.Certificate{
			Subject:     pkix.Name{CommonName: u.name, Organization: u.groups},
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, key.Public(), ca, caKey)
		if err != nil {
			return p, err
		}
		c := p.client(u.name)
		errs = append(errs, certs.WriteCert(c.cert, der), certs.WriteKey(c.key, key))
	}

	saKey, err := newKey()
	if err != nil {
		return p, err
	}
	pub, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return p, fmt.Errorf("kubestack: %w", err)
	}
	errs = append(errs, certs.WriteKey(p.saKey, saKey),
		os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644))
	if err := errors.Join(errs...); err != nil {
		return p, fmt.Errorf("kubestack: writing keys: %w", err)
	}
	return p, nil
}

// newKey is certs.NewKey with the package's error prefix.
func newKey() (*ecdsa.PrivateKey, error) {
	k, err := certs.NewKey()
	if err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	return k, nil
}

// sign is certs.Sign with the package's error prefix.
func sign(tmpl *x509.Certificate, pub crypto.PublicKey, parent *x509.Certificate, parentKey crypto.Signer) ([]byte, error) {
	der, err := certs.Sign(tmpl, pub, parent, parentKey)
	if err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	return der, nil
}

// sanitize makes a user name usable in a file name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

// issueClient returns the client certificate of user in groups, signing it with the
// cluster CA first when it is not on disk yet (identities only some clusters need: the
// real nodes' kubelets, CoreDNS).
func (p pki) issueClient(user string, groups ...string) (clientCert, error) {
	c := p.client(user)
	if _, err := os.Stat(c.cert); err == nil {
		if _, err := os.Stat(c.key); err == nil {
			return c, nil
		}
	}
	return c, p.issue(c, &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// issueServing returns a serving certificate for the given IP addresses and DNS names,
// signed by the cluster CA, written as name.crt and name.key (a registry's, say).
func (p pki) issueServing(name string, ips []net.IP, dnsNames ...string) (clientCert, error) {
	base := filepath.Join(p.dir, "serving-"+sanitize(name))
	c := clientCert{cert: base + ".crt", key: base + ".key"}
	return c, p.issue(c, &x509.Certificate{
		Subject:     pkix.Name{CommonName: name},
		DNSNames:    dnsNames,
		IPAddresses: ips,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// issue signs tmpl for a new key with the cluster CA and writes both to c's paths.
func (p pki) issue(c clientCert, tmpl *x509.Certificate) error {
	ca, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	key, err := newKey()
	if err != nil {
		return err
	}
	der, err := sign(tmpl, key.Public(), ca, caKey)
	if err != nil {
		return err
	}
	if err := errors.Join(certs.WriteCert(c.cert, der), certs.WriteKey(c.key, key)); err != nil {
		return fmt.Errorf("kubestack: writing keys: %w", err)
	}
	return nil
}

// loadCA reads the cluster CA's certificate and key.
func (p pki) loadCA() (*x509.Certificate, crypto.Signer, error) {
	certPEM, err := os.ReadFile(p.caCert)
	if err != nil {
		return nil, nil, fmt.Errorf("kubestack: %w", err)
	}
	keyPEM, err := os.ReadFile(p.caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("kubestack: %w", err)
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("kubestack: %s or %s is not PEM", p.caCert, p.caKey)
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("kubestack: %w", err)
	}
	key, err := parseKey(kb)
	if err != nil {
		return nil, nil, err
	}
	return ca, key, nil
}

func parseKey(b *pem.Block) (crypto.Signer, error) {
	if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("kubestack: CA key: %w", err)
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("kubestack: CA key cannot sign")
	}
	return s, nil
}
