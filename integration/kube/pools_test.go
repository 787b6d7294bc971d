package kube

import (
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// An idle-pool job runs at the idle PriorityClass on capacity nobody uses; when
// urgent work needs the GPUs, the scheduler preempts it; the job counts a preemption
// (not a failure), waits, and runs again once the urgent work is done.
func TestIdlePoolJobIsPreemptedAndRecovered(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-idle", "borrowed"
	submit(t, ctx, kwokJob("borrowed", "kube-idle", "8s", `
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  resources: {pool: idle}
  roles: {worker: {replicas: 3, resources: {gpu: 8}}}
  logs: {forward: false}
`))
	waitJob(t, ctx, ws, name, "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	for _, p := range attemptPods(t, ctx, ws, name, 0) {
		if p.Spec.PriorityClassName != idleClass || p.Spec.Priority == nil || *p.Spec.Priority != -100 {
			t.Errorf("%s: priority class %q (%v), want %s", p.Name, p.Spec.PriorityClassName, p.Spec.Priority, idleClass)
		}
	}
	// Urgent work takes one node's GPUs: every GPU of the cluster is the idle job's.
	cs := env.cluster.Client
	urgent := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "urgent", Namespace: ws, Annotations: map[string]string{kubestack.AnnotationCompleteAfter: "3s"}},
		Spec: corev1.PodSpec{
			PriorityClassName: urgentClass, RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "registry.local/urgent:1", Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{"nvidia.com/gpu": resourceQuantity(strconv.Itoa(8))},
			}}},
		},
	}
	if _, err := cs.CoreV1().Pods(ws).Create(ctx, urgent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "the urgent pod to run", func() bool {
		p, err := cs.CoreV1().Pods(ws).Get(ctx, "urgent", metav1.GetOptions{})
		return err == nil && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded)
	}, itest.PollInterval)
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded || j.Status.Preemptions < 1 || j.Status.Restarts != 0 {
		t.Fatalf("%s after %d preemptions and %d restarts: %s", j.Status.Phase, j.Status.Preemptions, j.Status.Restarts, j.Status.Message)
	}
	if a0 := j.Status.Attempts[0]; a0.Class != schemas.FailurePreempted || a0.Action != "Preemption" {
		t.Errorf("attempt 0: %s %s (%s), want Preempted, Preemption", a0.Class, a0.Action, a0.Message)
	}
	st, err := env.api.GetQuota(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if st.Used.GPU != 0 || len(st.Admitted)+len(st.Queue) != 0 {
		t.Errorf("the idle job counted against the workspace quota: %+v", st)
	}
}

// Data sources: an S3 URI whose credentials come from a Secret, and a PVC (a shared file
// system) mounted in every replica.
func TestDataSourcesOnKubernetes(t *testing.T) {
	ctx := testContext(t)
	const ws, name = "kube-data", "withdata"
	cs := env.cluster.Client
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-data-shared"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("10Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName:              "manual",
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/mnt/shared"}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := "manual"
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ws},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &class,
			VolumeName:       pv.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resourceQuantity("10Gi")}},
		},
	}
	if _, err := cs.CoreV1().PersistentVolumeClaims(ws).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "datasets-s3", Namespace: ws},
		StringData: map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "not-printed"}}
	if _, err := cs.CoreV1().Secrets(ws).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Both jobs mount the same data: an S3 prefix with its secret and a read-only PVC.
	dataJob := func(replicas int) string {
		return fmt.Sprintf(`
  framework: pytorch
  image: registry.local/train:1.4
  command: [torchrun, train.py]
  roles: {worker: {replicas: %d}}
  logs: {forward: false}
  data:
  - {name: clicks, uri: "s3://datasets/clicks/", secretRef: datasets-s3}
  - {name: shared, pvc: {claimName: shared, readOnly: true}, mountPath: /mnt/shared}
`, replicas)
	}
	submit(t, ctx, kwokJob("withdata", "kube-data", "2s", dataJob(2)))
	j := waitJob(t, ctx, ws, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("%s: %s", j.Status.Phase, j.Status.Message)
	}
	// The pods are cleaned up when the job ends: read what the scheduler saw through
	// the pods of a second job kept running.
	submit(t, ctx, itest.JobDoc("inspect", "kube-data", dataJob(1)))
	waitJob(t, ctx, ws, "inspect", "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	pods := jobPods(t, ctx, ws, "inspect")
	if len(pods) != 1 {
		t.Fatalf("%d pods", len(pods))
	}
	p := pods[0]
	c := p.Spec.Containers[0]
	vars := map[string]*corev1.EnvVar{}
	for i := range c.Env {
		vars[c.Env[i].Name] = &c.Env[i]
	}
	if e := vars["DLC_DATA_CLICKS"]; e == nil || e.Value != "s3://datasets/clicks/" {
		t.Errorf("DLC_DATA_CLICKS = %+v", e)
	}
	for name, key := range map[string]string{"DLC_DATA_CLICKS_ACCESS_KEY_ID": "AWS_ACCESS_KEY_ID", "DLC_DATA_CLICKS_SECRET_ACCESS_KEY": "AWS_SECRET_ACCESS_KEY"} {
		e := vars[name]
		if e == nil || e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
			e.ValueFrom.SecretKeyRef.Name != "datasets-s3" || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("%s = %+v, want a reference to key %s of Secret datasets-s3 (never the value)", name, e, key)
		}
	}
	if e := vars["DLC_DATA_SHARED"]; e == nil || e.Value != "/mnt/shared" {
		t.Errorf("DLC_DATA_SHARED = %+v", e)
	}
	var mounted, volume bool
	for _, m := range c.VolumeMounts {
		mounted = mounted || (m.MountPath == "/mnt/shared" && m.ReadOnly)
	}
	for _, v := range p.Spec.Volumes {
		volume = volume || (v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "shared" && v.PersistentVolumeClaim.ReadOnly)
	}
	if !mounted || !volume {
		t.Errorf("PVC mount %v, volume %v: mounts %+v volumes %+v", mounted, volume, c.VolumeMounts, p.Spec.Volumes)
	}
	if _, err := env.api.StopJob(ctx, ws, "inspect", "done"); err != nil {
		t.Fatal(err)
	}
}
