package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// podJob is a one-replica pytorch job in workspace vision with the given pod options.
func podJob(name string, pool schemas.Pool, o *schemas.PodOptions) *schemastest.JobBuilder {
	return schemastest.Job(name).Workspace("vision").Pool(pool).Role("worker", 1).
		Mutate(func(j *schemas.TrainingJob) { j.Spec.Pod = o })
}

func TestPodRunsAsImageUserUnlessPoolIsRestricted(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs, WithPool(schemas.PoolSpot, PoolConfig{Policy: PodPolicy{Security: SecurityRestricted}}))
	launch(t, b, gangOf(t, podJob("root", schemas.PoolQuota, nil)))
	launch(t, b, gangOf(t, podJob("nonroot", schemas.PoolSpot, nil)))
	ps := pods(t, cs, "vision")

	root := ps["root-worker-0-a1"]
	if root.Spec.SecurityContext != nil || root.Spec.Containers[0].SecurityContext != nil {
		t.Errorf("quota pool: security contexts %v %v, want none (the image's user)", root.Spec.SecurityContext, root.Spec.Containers[0].SecurityContext)
	}
	restricted := ps["nonroot-worker-0-a1"]
	wantPod := &corev1.PodSecurityContext{RunAsNonRoot: new(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	wantContainer := &corev1.SecurityContext{AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if diff := cmp.Diff(wantPod, restricted.Spec.SecurityContext); diff != "" {
		t.Errorf("restricted pod security context (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantContainer, restricted.Spec.Containers[0].SecurityContext); diff != "" {
		t.Errorf("restricted container security context (-want +got):\n%s", diff)
	}
}

func TestPodOptionsReachThePod(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs, WithImagePullSecrets("platform-cred"),
		WithPool(schemas.PoolQuota, PoolConfig{Policy: PodPolicy{ImagePullSecrets: []string{"pool-cred", "platform-cred"}, ServiceAccountName: "pool-sa"}}))
	limit := resource.MustParse("20Gi")
	o := &schemas.PodOptions{
		ServiceAccountName: "trainer",
		ImagePullSecrets:   []string{"ngc"},
		ShmSize:            new(resource.MustParse("16Gi")),
		Volumes: []schemas.Volume{
			{Name: "scratch", MountPath: "/scratch", EmptyDir: &schemas.EmptyDirVolume{SizeLimit: &limit}},
			{Name: "cfg", MountPath: "/etc/train", ReadOnly: true, ConfigMap: &schemas.ConfigMapVolume{Name: "train-config"}},
			{Name: "token", MountPath: "/var/run/hf", ReadOnly: true, Secret: &schemas.SecretVolume{SecretName: "hf-token"}},
			{Name: "ckpt", MountPath: "/ckpt", PVC: &schemas.PVCSource{ClaimName: "ckpt"}},
		},
	}
	launch(t, b, gangOf(t, podJob("opts", schemas.PoolQuota, o)))
	p := pods(t, cs, "vision")["opts-worker-0-a1"]

	if p.Spec.ServiceAccountName != "trainer" || p.Spec.AutomountServiceAccountToken != nil {
		t.Errorf("service account %q, automount %v; want the job's, as the account says", p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken)
	}
	wantSecrets := []corev1.LocalObjectReference{{Name: "platform-cred"}, {Name: "pool-cred"}, {Name: "ngc"}}
	if diff := cmp.Diff(wantSecrets, p.Spec.ImagePullSecrets); diff != "" {
		t.Errorf("image pull secrets (-want +got):\n%s", diff)
	}
	wantVolumes := []corev1.Volume{
		{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("16Gi"))}}},
		{Name: "vol-scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}},
		{Name: "vol-cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "train-config"}}}},
		{Name: "vol-token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "hf-token"}}},
		{Name: "vol-ckpt", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "ckpt"}}},
	}
	if diff := cmp.Diff(wantVolumes, p.Spec.Volumes, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
		t.Errorf("volumes (-want +got):\n%s", diff)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "dshm", MountPath: "/dev/shm"},
		{Name: "vol-scratch", MountPath: "/scratch"},
		{Name: "vol-cfg", MountPath: "/etc/train", ReadOnly: true},
		{Name: "vol-token", MountPath: "/var/run/hf", ReadOnly: true},
		{Name: "vol-ckpt", MountPath: "/ckpt"},
	}
	if diff := cmp.Diff(wantMounts, p.Spec.Containers[0].VolumeMounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}

	// Without the job's account, the pool's; shm size 0 mounts no /dev/shm.
	launch(t, b, gangOf(t, podJob("poolsa", schemas.PoolQuota, &schemas.PodOptions{ShmSize: new(resource.MustParse("0"))})))
	p = pods(t, cs, "vision")["poolsa-worker-0-a1"]
	if p.Spec.ServiceAccountName != "pool-sa" || len(p.Spec.Volumes) != 0 {
		t.Errorf("service account %q, volumes %v; want pool-sa and none", p.Spec.ServiceAccountName, p.Spec.Volumes)
	}
}

func TestPoolPolicyGatesHostAccessAndExtendedResources(t *testing.T) {
	rdma := func(j *schemas.TrainingJob) {
		r := j.Spec.Roles["worker"]
		r.Resources.Extended = map[string]resource.Quantity{"rdma/hca": resource.MustParse("1")}
		j.Spec.Roles["worker"] = r
	}
	hostNet := &schemas.PodOptions{HostNetwork: true}
	hostPath := &schemas.PodOptions{Volumes: []schemas.Volume{{Name: "nvme", MountPath: "/nvme", HostPath: &schemas.HostPathVolume{Path: "/mnt/nvme/cache"}}}}
	refused := []struct {
		name, field string
		job         *schemastest.JobBuilder
	}{
		{"hostnet", "spec.pod.hostNetwork", podJob("hostnet", schemas.PoolQuota, hostNet)},
		{"hostpath", "spec.pod.volumes[0].hostPath.path", podJob("hostpath", schemas.PoolQuota, hostPath)},
		{"rdma", `spec.roles.worker.resources.extended["rdma/hca"]`, podJob("rdma", schemas.PoolQuota, nil).Mutate(rdma)},
		{"shmvol", "spec.pod.volumes[0].mountPath", podJob("shmvol", schemas.PoolQuota, &schemas.PodOptions{Volumes: []schemas.Volume{
			{Name: "shm", MountPath: "/dev/shm", EmptyDir: &schemas.EmptyDirVolume{Medium: "Memory"}}}})},
	}
	cs := newClient()
	b := newBackend(t, cs, WithPool(schemas.PoolPublic, PoolConfig{Policy: PodPolicy{
		AllowHostNetwork: true, HostPaths: []string{"/mnt/nvme"}, ExtendedResources: []string{"rdma/hca"},
	}}))
	for _, tc := range refused {
		err := b.Launch(context.Background(), gangOf(t, tc.job))
		if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Launch = %v, want an invalid spec error naming %s", tc.name, err, tc.field)
		}
	}
	ctx := context.Background()
	if l, _ := cs.CoreV1().Services("vision").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("refused gangs created %d services", len(l.Items))
	}
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("refused gangs created %d pods", n)
	}

	// The public pool allows them.
	both := &schemas.PodOptions{HostNetwork: true, Volumes: hostPath.Volumes}
	launch(t, b, gangOf(t, podJob("allowed", schemas.PoolPublic, both).Mutate(rdma)))
	p := pods(t, cs, "vision")["allowed-worker-0-a1"]
	if !p.Spec.HostNetwork || p.Spec.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %v, dnsPolicy %q", p.Spec.HostNetwork, p.Spec.DNSPolicy)
	}
	if v := p.Spec.Volumes[len(p.Spec.Volumes)-1]; v.HostPath == nil || v.HostPath.Path != "/mnt/nvme/cache" {
		t.Errorf("last volume %+v, want hostPath /mnt/nvme/cache", v)
	}
	c := p.Spec.Containers[0]
	if q := c.Resources.Limits["rdma/hca"]; q.Value() != 1 {
		t.Errorf("rdma/hca limit %v", q.String())
	}
	if q := c.Resources.Requests["rdma/hca"]; q.Value() != 1 {
		t.Errorf("rdma/hca request %v", q.String())
	}
}

func TestParseSecurityProfile(t *testing.T) {
	for in, want := range map[string]SecurityProfile{"": SecurityImage, "image": SecurityImage, "restricted": SecurityRestricted} {
		if got, err := ParseSecurityProfile(in); err != nil || got != want {
			t.Errorf("ParseSecurityProfile(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseSecurityProfile("baseline"); err == nil {
		t.Error("baseline accepted")
	}
}

func TestAdmissionRefusalIsAnInvalidSpec(t *testing.T) {
	for name, refusal := range map[string]error{
		"PodSecurity": apierrors.NewForbidden(corev1.Resource("pods"), "p", errors.New(`violates PodSecurity "restricted:latest": runAsNonRoot != true`)),
		"invalid":     apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), "p", nil),
	} {
		cs := newClient()
		cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, refusal })
		b := newBackend(t, cs)
		err := b.Launch(context.Background(), gangOf(t, podJob("refused", schemas.PoolQuota, nil)))
		if !errors.Is(err, backend.ErrInvalidSpec) {
			t.Errorf("%s: Launch = %v, want an invalid spec", name, err)
		}
	}
	// Any other refusal may pass: retried.
	cs := newClient()
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "p", errors.New("exceeded quota"))
	})
	b := newBackend(t, cs)
	if err := b.Launch(context.Background(), gangOf(t, podJob("quota", schemas.PoolQuota, nil))); err == nil || errors.Is(err, backend.ErrInvalidSpec) {
		t.Errorf("quota refusal: %v, want a retryable error", err)
	}
}
