package helm

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// TestInstallUpgradeKeepsAdminToken: helm install, upgrade and uninstall on the test
// control plane. The admin token the chart generates on install is read back on
// upgrade (lookup) rather than replaced, and outlives the release (resource policy
// keep), while the rest of the release goes.
func TestInstallUpgradeKeepsAdminToken(t *testing.T) {
	ctx := itest.Context(t, 4*time.Minute)
	const release, ns = "keep", "chart-keep"
	kube := []string{"--kubeconfig", env.cluster.AdminKubeconfig, "--namespace", ns}
	token := func() string {
		t.Helper()
		s, err := env.cluster.Client.CoreV1().Secrets(ns).Get(ctx, release+"-opendlc-admin-token", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tok := string(s.Data["admin-token"])
		if _, err := auth.ParseToken(tok); err != nil {
			t.Fatalf("admin token %q: %v", tok, err)
		}
		return tok
	}
	if _, err := helmCmd(ctx, append([]string{"install", release, chartDir, "--create-namespace"}, kube...)...); err != nil {
		t.Fatal(err)
	}
	first := token()
	if _, err := helmCmd(ctx, append([]string{"upgrade", release, chartDir, "--set", "server.verbose=true"}, kube...)...); err != nil {
		t.Fatal(err)
	}
	if second := token(); second != first {
		t.Errorf("upgrade replaced the admin token")
	}
	d, err := env.cluster.Client.AppsV1().Deployments(ns).Get(ctx, release+"-opendlc-server", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; args[len(args)-1] != "--verbose" {
		t.Errorf("upgraded server args %q, want --verbose last", args)
	}
	if _, err := helmCmd(ctx, append([]string{"uninstall", release}, kube...)...); err != nil {
		t.Fatal(err)
	}
	if got := token(); got != first {
		t.Errorf("the admin token changed across uninstall")
	}
	err = testutil.Poll(ctx, time.Minute, "the server Deployment is gone", func() error {
		_, err := env.cluster.Client.AppsV1().Deployments(ns).Get(ctx, release+"-opendlc-server", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		t.Errorf("the server Deployment after uninstall: %v", err)
	}
}
