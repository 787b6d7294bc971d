package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// A gang runs in the namespace its ref names; without one, or with the registry's
// default (the workspace's own name), in the namespace the workspace maps to.
func TestNamespaceOfRef(t *testing.T) {
	b := newUncachedBackend(t, newClient(), WithNamespacePrefix("dlc-"))
	for _, tc := range []struct {
		ref  backend.GangRef
		want string
	}{
		{backend.GangRef{Workspace: "vision"}, "dlc-vision"},
		{backend.GangRef{Workspace: "vision", Namespace: "vision"}, "dlc-vision"},
		{backend.GangRef{Workspace: "vision", Namespace: "team-vision"}, "team-vision"},
	} {
		if got := b.namespaceOf(tc.ref); got != tc.want {
			t.Errorf("namespaceOf(%+v) = %q, want %q", tc.ref, got, tc.want)
		}
	}
}

// A gang whose ref names a namespace is created, observed, stopped and cleaned up
// there.
func TestGangRunsInItsRefNamespace(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	g.Namespace = "team-vision"
	launch(t, b, g)
	if n := len(pods(t, cs, "team-vision")); n != 3 {
		t.Fatalf("%d pods in team-vision, want 3", n)
	}
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods in vision, want none", n)
	}
	if reps := observe(t, b, g.GangRef); len(reps) != 3 {
		t.Errorf("observed %d replicas", len(reps))
	}
	ctx := context.Background()
	if err := b.Stop(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
	if err := b.Cleanup(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
	if n := len(pods(t, cs, "team-vision")); n != 0 {
		t.Errorf("%d pods left in team-vision", n)
	}
}

// Namespaced mode: informers per namespace, no namespace created, nothing listed or
// watched cluster-wide, and a gang of another namespace refused before any request.
func TestNamespacedMode(t *testing.T) {
	cs := newClient()
	b := newUncachedBackend(t, cs, WithNamespaces("team-a", "team-b"), WithHealthChecks(false))
	ctx := context.Background()
	g := gangOf(t, ddp("resnet"))
	g.Namespace = "team-a"
	launch(t, b, g)
	testutil.Eventually(t, 10*time.Second, "the informers of both namespaces to sync", func() bool { return b.cache.synced("team-a") && b.cache.synced("team-b") })
	observe(t, b, g.GangRef)
	if n := len(pods(t, cs, "team-a")); n != 3 {
		t.Errorf("%d pods in team-a, want 3", n)
	}

	other := gangOf(t, ddp("elsewhere"))
	other.Namespace = "kube-system"
	before := len(cs.Actions())
	err := b.Launch(ctx, other)
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "namespace kube-system is not one of the worker's namespaces (team-a, team-b)") {
		t.Errorf("Launch in kube-system: %v", err)
	}
	if _, err := b.Observe(ctx, other.GangRef); !errors.Is(err, backend.ErrGangNotFound) {
		t.Errorf("Observe in kube-system: %v, want ErrGangNotFound", err)
	}
	if err := b.Stop(ctx, other.GangRef); err != nil {
		t.Errorf("Stop in kube-system: %v", err)
	}
	if err := b.Cleanup(ctx, other.GangRef); err != nil {
		t.Errorf("Cleanup in kube-system: %v", err)
	}
	// The node informer's list and watch (cluster-scoped, and allowed: see below) can
	// come at any time, as a watch is made again; every other request is the gang's.
	var got []k8stesting.Action
	for _, a := range cs.Actions()[before:] {
		if r := a.GetResource().Resource; r != "nodes" || (a.GetVerb() != "list" && a.GetVerb() != "watch") {
			got = append(got, a)
		}
	}
	if len(got) != 0 {
		t.Errorf("%d requests for a gang outside the worker's namespaces, first %v", len(got), got[0])
	}

	for _, a := range cs.Actions() {
		res := a.GetResource().Resource
		switch {
		case res == "namespaces":
			t.Errorf("namespaced mode made a namespace request: %s", a.GetVerb())
		case (a.GetVerb() == "list" || a.GetVerb() == "watch") && res != "nodes" && a.GetNamespace() == metav1.NamespaceAll:
			t.Errorf("namespaced mode made a cluster-wide %s of %s", a.GetVerb(), res)
		}
	}
}

// With health checks off, a job's check refuses to run and re-checks touch nothing.
func TestHealthChecksOff(t *testing.T) {
	cs := newClient()
	b := newUncachedBackend(t, cs, WithHealthChecks(false))
	ctx := context.Background()
	job := ddp("checked").Obj()
	_, err := b.CheckNodes(ctx, backend.CheckNodesInput{Ref: backend.GangRef{Workspace: "vision", Job: "checked"}, Job: *job})
	if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), "node health checks are off") {
		t.Errorf("CheckNodes: %v", err)
	}
	res, err := b.RecheckQuarantined(ctx, 0)
	if err != nil || len(res) != 0 {
		t.Errorf("RecheckQuarantined: %v, %v", res, err)
	}
	if n := len(cs.Actions()); n != 0 {
		t.Errorf("%d requests with health checks off, first %v", n, cs.Actions()[0])
	}
}

// A workspace's pod defaults come after the job's own and before the pool's and the
// worker's: service account job > workspace > pool > worker; pull secrets worker,
// pool, workspace, job, each once.
func TestWorkspacePodDefaults(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs, WithImagePullSecrets("platform-cred"), WithServiceAccount("worker-sa"),
		WithPool(schemas.PoolQuota, PoolConfig{Policy: PodPolicy{ImagePullSecrets: []string{"pool-cred"}, ServiceAccountName: "pool-sa"}}))
	defaults := &schemas.PodDefaults{ServiceAccountName: "ws-sa", ImagePullSecrets: []string{"ws-cred", "pool-cred"}}
	for _, tc := range []struct {
		name     string
		pod      *schemas.PodOptions
		defaults *schemas.PodDefaults
		sa       string
		secrets  []string
	}{
		{"job", &schemas.PodOptions{ServiceAccountName: "job-sa", ImagePullSecrets: []string{"job-cred"}}, defaults,
			"job-sa", []string{"platform-cred", "pool-cred", "ws-cred", "job-cred"}},
		{"workspace", nil, defaults, "ws-sa", []string{"platform-cred", "pool-cred", "ws-cred"}},
		{"pool", nil, nil, "pool-sa", []string{"platform-cred", "pool-cred"}},
	} {
		g := gangOf(t, podJob(tc.name, schemas.PoolQuota, tc.pod))
		g.PodDefaults = tc.defaults
		launch(t, b, g)
		p := pods(t, cs, "vision")[tc.name+"-worker-0-a1"]
		var secrets []string
		for _, s := range p.Spec.ImagePullSecrets {
			secrets = append(secrets, s.Name)
		}
		if p.Spec.ServiceAccountName != tc.sa || !cmp.Equal(secrets, tc.secrets) {
			t.Errorf("%s: service account %q, pull secrets %v; want %q, %v", tc.name, p.Spec.ServiceAccountName, secrets, tc.sa, tc.secrets)
		}
	}
	// The worker's account when nothing else names one (a pool without policy).
	g := gangOf(t, podJob("plain", schemas.PoolPublic, nil))
	launch(t, b, g)
	if sa := pods(t, cs, "vision")["plain-worker-0-a1"].Spec.ServiceAccountName; sa != "worker-sa" {
		t.Errorf("service account %q, want the worker's", sa)
	}
}

// A workspace whose pod defaults say restricted runs its pods under the restricted
// profile in a pool that runs images as their own user; other workspaces there do not.
func TestWorkspaceSecurityTightensThePool(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	strict := gangOf(t, podJob("strict", schemas.PoolPublic, nil))
	strict.PodDefaults = &schemas.PodDefaults{Security: schemas.SecurityRestricted}
	launch(t, b, strict)
	launch(t, b, gangOf(t, podJob("loose", schemas.PoolPublic, nil)))
	got := pods(t, cs, "vision")
	p := got["strict-worker-0-a1"]
	if sc := p.Spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("restricted workspace: pod security context %+v, want runAsNonRoot", sc)
	}
	if c := p.Spec.Containers[0].SecurityContext; c == nil || c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Errorf("restricted workspace: container security context %+v, want no privilege escalation", c)
	}
	if sc := got["loose-worker-0-a1"].Spec.SecurityContext; sc != nil && sc.RunAsNonRoot != nil && *sc.RunAsNonRoot {
		t.Errorf("workspace without a policy: pod security context %+v, want the image's user", sc)
	}
}

// ConfigMap and Secret volumes' items and modes, and a volume's subPath, reach the pod.
func TestVolumeProjectionsReachThePod(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	mode := func(m int32) *int32 { return &m }
	o := &schemas.PodOptions{Volumes: []schemas.Volume{
		{Name: "cfg", MountPath: "/etc/train", ConfigMap: &schemas.ConfigMapVolume{Name: "train-code", DefaultMode: mode(0o555),
			Items: []schemas.KeyToPath{{Key: "train.py", Path: "bin/train.py", Mode: mode(0o755)}}}},
		{Name: "tok", MountPath: "/var/run/hf/token", SubPath: "token", ReadOnly: true,
			Secret: &schemas.SecretVolume{SecretName: "hf", DefaultMode: mode(0o400), Items: []schemas.KeyToPath{{Key: "token", Path: "token"}}}},
	}}
	launch(t, b, gangOf(t, podJob("proj", schemas.PoolQuota, o)))
	p := pods(t, cs, "vision")["proj-worker-0-a1"]
	want := []corev1.Volume{
		{Name: "vol-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "train-code"}, DefaultMode: mode(0o555),
			Items: []corev1.KeyToPath{{Key: "train.py", Path: "bin/train.py", Mode: mode(0o755)}},
		}}},
		{Name: "vol-tok", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "hf", DefaultMode: mode(0o400), Items: []corev1.KeyToPath{{Key: "token", Path: "token"}},
		}}},
	}
	var got []corev1.Volume
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, "vol-") {
			got = append(got, v)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	var mount corev1.VolumeMount
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		if m.Name == "vol-tok" {
			mount = m
		}
	}
	if mount.SubPath != "token" || !mount.ReadOnly || mount.MountPath != "/var/run/hf/token" {
		t.Errorf("mount %+v, want subPath token, read-only", mount)
	}
}
