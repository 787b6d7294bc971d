package main

import (
	"strings"
	"testing"

	"github.com/opendlc/opendlc/embedded"
)

// TestLocalTenancy: with --kubeconfig nothing changes; without the sandbox the stack is
// single-tenant unless --trust-local-jobs says otherwise, and the banner says which.
func TestLocalTenancy(t *testing.T) {
	kube := embedded.Config{Kubeconfig: "kubeconfig"}
	if line := localTenancy(&kube, false, false); line != "" || kube.Sandbox || kube.SingleTenant != "" {
		t.Errorf("with --kubeconfig: %q %+v", line, kube)
	}
	var off embedded.Config
	line := localTenancy(&off, false, false)
	if off.Sandbox || !strings.Contains(off.SingleTenant, "--local-sandbox=false") || !strings.Contains(line, "single-tenant") {
		t.Errorf("--local-sandbox=false: %q, SingleTenant %q", line, off.SingleTenant)
	}
	var trusted embedded.Config
	line = localTenancy(&trusted, false, true)
	if trusted.Sandbox || trusted.SingleTenant != "" || !strings.Contains(line, "--trust-local-jobs") {
		t.Errorf("--trust-local-jobs: %q, SingleTenant %q", line, trusted.SingleTenant)
	}
}
