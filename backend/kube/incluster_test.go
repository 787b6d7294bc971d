package kube

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInClusterConfigReadsTheGivenDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "6443")
	if _, err := InClusterConfig(dir); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("no token: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte("tok"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := InClusterConfig(dir); err == nil || !strings.Contains(err.Error(), "CA") {
		t.Errorf("no CA: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("pem"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvServiceAccountDir, dir)
	cfg, err := RESTConfig(InCluster)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://[fd00::1]:6443" || cfg.BearerToken != "tok" || cfg.BearerTokenFile != filepath.Join(dir, "token") ||
		cfg.TLSClientConfig.CAFile != filepath.Join(dir, "ca.crt") || cfg.QPS != 50 {
		t.Errorf("config %+v", cfg)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := RESTConfig(InCluster); err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("outside a pod: %v", err)
	}
}
