package kubestack

import (
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Client rate limits for the configs kubestack hands out: client-go's
// defaults (5 QPS, burst 10) would throttle tests that create many objects.
const (
	clientQPS   = 100
	clientBurst = 200
)

// writeCertKubeconfig writes Dir/<name>.kubeconfig for the client
// certificate of user, with every certificate and key inline so that the
// file works wherever it is copied.
func (c *Cluster) writeCertKubeconfig(name, user string) (string, error) {
	cc := c.pki.client(user)
	certData, err := os.ReadFile(cc.cert)
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	keyData, err := os.ReadFile(cc.key)
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	return c.writeKubeconfig(name, metav1.NamespaceDefault, &clientcmdapi.AuthInfo{ClientCertificateData: certData, ClientKeyData: keyData})
}

// writeKubeconfig writes Dir/<name>.kubeconfig: one cluster (Server, trusting
// the cluster CA), one user with auth, one context in namespace, selected.
func (c *Cluster) writeKubeconfig(name, namespace string, auth *clientcmdapi.AuthInfo) (string, error) {
	caData, err := os.ReadFile(c.pki.caCert)
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubestack"] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: caData}
	cfg.AuthInfos[name] = auth
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "kubestack", AuthInfo: name, Namespace: namespace}
	cfg.CurrentContext = name
	path := filepath.Join(c.Dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubestack: write %s: %w", path, err)
	}
	return path, nil
}

// restConfigFromKubeconfig loads path as client-go would, with higher rate limits.
func restConfigFromKubeconfig(path string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubestack: load %s: %w", path, err)
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	return cfg, nil
}
