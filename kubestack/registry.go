package kubestack

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/internal/tools"
)

// Registry is a private image registry on the machine for the real nodes: the CNCF
// distribution registry (built from its Go module), over TLS with a certificate of the
// cluster CA, and htpasswd authentication, so that pulls, imagePullSecrets and pull
// errors are real. The nodes' containerd trust it through their certs.d settings.
type Registry struct {
	// Addr is 127.0.0.1:port, the host part of the images' references.
	Addr string
	// User and Password are the only credentials it accepts.
	User, Password string

	c                 *Cluster
	bin, dir, confPth string
	proc              *process
	client            *http.Client
}

// StartRegistry starts a registry with fresh credentials and tells every real node's
// containerd to trust it. Close stops it with the cluster.
func (c *Cluster) StartRegistry(ctx context.Context) (*Registry, error) {
	if len(c.realNodes) == 0 {
		return nil, errors.New("kubestack: a registry serves real nodes; start some (Options.RealNodes)")
	}
	bin, err := tools.Ensure(ctx, "registry")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &Registry{Addr: loopback(port), User: "puller", c: c, bin: bin, dir: filepath.Join(c.realNodesDir(), "registry")}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		return nil, err
	}
	r.Password = hex.EncodeToString(secret)
	if err := os.MkdirAll(filepath.Join(r.dir, "data"), 0o700); err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(r.Password), bcrypt.DefaultCost)
	if err != nil {
		return nil, err
	}
	htpasswd := filepath.Join(r.dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(r.User+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	serving, err := c.pki.issueServing("registry", []net.IP{net.IPv4(127, 0, 0, 1)}, "localhost")
	if err != nil {
		return nil, err
	}
	r.confPth = filepath.Join(r.dir, "config.yml")
	conf := fmt.Sprintf(`version: 0.1
log:
  level: warn
  accesslog: {disabled: true}
storage:
  filesystem: {rootdirectory: %q}
  delete: {enabled: true}
http:
  addr: %q
  tls: {certificate: %q, key: %q}
auth:
  htpasswd: {realm: kubestack, path: %q}
`, filepath.Join(r.dir, "data"), r.Addr, serving.cert, serving.key, htpasswd)
	if err := writeFile(r.confPth, conf); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(c.pki.caCert)
	if err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	r.client = &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for _, n := range c.realNodes {
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n  ca = %q\n",
			"https://"+r.Addr, "https://"+r.Addr, c.pki.caCert)
		// containerd looks the host up as "127.0.0.1:port" (a directory of that name).
		d := filepath.Join(n.dir, "certs.d", r.Addr)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("kubestack: %w", err)
		}
		if err := writeFile(filepath.Join(d, "hosts.toml"), hosts); err != nil {
			return nil, err
		}
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// Start starts the registry (again, after Stop) on the same address and storage, and
// waits until it answers.
func (r *Registry) Start(ctx context.Context) error {
	p, err := startProcess("registry", r.bin, []string{"serve", r.confPth}, r.c.logPath("registry"))
	if err != nil {
		return err
	}
	err = p.Poll(ctx, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.Addr+"/v2/", nil)
		if err != nil {
			return err
		}
		resp, err := r.client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			return fmt.Errorf("GET /v2/ without credentials: %s, want 401", resp.Status)
		}
		return nil
	})
	if err != nil {
		return errors.Join(err, p.Stop())
	}
	r.proc = p
	r.c.track(p)
	return nil
}

// Stop stops the registry; pulls from it fail until Start.
func (r *Registry) Stop() error {
	if r.proc == nil {
		return nil
	}
	err := r.proc.Stop()
	r.proc = nil
	return err
}

// Push copies img (a tarball of package images) into the registry as repo:tag and
// returns the reference pods name it by.
func (r *Registry) Push(ctx context.Context, img images.Image, repo, tag string) (string, error) {
	src, err := name.NewTag(img.Ref)
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	v1img, err := tarball.ImageFromPath(img.Tarball, &src)
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	ref := r.Addr + "/" + repo + ":" + tag
	dst, err := name.NewTag(ref)
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	err = remote.Write(dst, v1img, remote.WithContext(ctx), remote.WithTransport(r.client.Transport),
		remote.WithAuth(&authn.Basic{Username: r.User, Password: r.Password}))
	if err != nil {
		return "", fmt.Errorf("kubestack: push %s: %w", ref, err)
	}
	return ref, nil
}

// PullSecret is a kubernetes.io/dockerconfigjson Secret named name in namespace with the
// registry's credentials, for a pod's imagePullSecrets.
func (r *Registry) PullSecret(namespace, secretName string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(r.User + ":" + r.Password))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{r.Addr: map[string]string{
		"username": r.User, "password": r.Password, "auth": auth,
	}}})
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}
}
