package kube

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

func TestLaunchCreatesServiceAndPods(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs,
		WithEnv(schemas.EnvVar{Name: "S3_ENDPOINT", Value: "http://s3:9000"}, schemas.EnvVar{Name: "TEAM", Value: "default"}),
		WithEnvFromSecret("s3-credentials"),
		WithPodAnnotations(map[string]string{"kwok.opendlc.io/complete-after": "2s"}),
	)
	g := gangOf(t, ddp("resnet").Env("TEAM", "cv").Env("LR", "$(not-expanded)"))
	launch(t, b, g)
	ctx := context.Background()

	ns, err := cs.CoreV1().Namespaces().Get(ctx, "vision", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("namespace: %v", err)
	}
	if ns.Labels[LabelManagedBy] != ManagedByValue {
		t.Errorf("namespace labels = %v", ns.Labels)
	}

	svc, err := cs.CoreV1().Services("vision").Get(ctx, "resnet-a1", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("service: %v", err)
	}
	gangLabels := map[string]string{
		"team": "cv", LabelManagedBy: ManagedByValue, LabelWorkspace: "vision", LabelJob: "resnet",
		LabelAttempt: "1", LabelGang: "vision.resnet.a1",
	}
	wantSvc := corev1.ServiceSpec{
		ClusterIP:                "None",
		Selector:                 map[string]string{LabelManagedBy: ManagedByValue, LabelGang: "vision.resnet.a1"},
		PublishNotReadyAddresses: true,
		Ports:                    []corev1.ServicePort{{Name: "rendezvous", Port: 23456, TargetPort: intstr.FromInt32(23456), Protocol: corev1.ProtocolTCP}},
	}
	if diff := cmp.Diff(wantSvc, svc.Spec); diff != "" {
		t.Errorf("service spec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(gangLabels, svc.Labels); diff != "" {
		t.Errorf("service labels (-want +got):\n%s", diff)
	}
	var refs []replicaRef
	if err := json.Unmarshal([]byte(svc.Annotations[AnnotationReplicas]), &refs); err != nil {
		t.Fatal(err)
	}
	wantRefs := []replicaRef{
		{Name: "resnet-master-0-a1", Role: "master", Index: 0},
		{Name: "resnet-worker-0-a1", Role: "worker", Index: 0},
		{Name: "resnet-worker-1-a1", Role: "worker", Index: 1},
	}
	if diff := cmp.Diff(wantRefs, refs); diff != "" {
		t.Errorf("replicas annotation (-want +got):\n%s", diff)
	}
	if svc.Annotations[AnnotationLaunched] != "true" {
		t.Errorf("service not marked launched: %v", svc.Annotations)
	}

	got := pods(t, cs, "vision")
	if len(got) != 3 {
		t.Fatalf("got %d pods, want 3", len(got))
	}
	podLabels := func(role, index string) map[string]string {
		l := map[string]string{LabelRole: role, LabelReplicaIndex: index}
		maps.Copy(l, gangLabels)
		return l
	}
	gpuResources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("64Gi"),
		ResourceGPU:           resource.MustParse("8"),
	}
	grace := int64(30)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "resnet-worker-1-a1",
			Namespace:   "vision",
			Labels:      podLabels("worker", "1"),
			Annotations: map[string]string{"kwok.opendlc.io/complete-after": "2s"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: "resnet-a1", UID: svc.UID,
				Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Hostname:      "worker-1",
			Subdomain:     "resnet-a1",
			Containers: []corev1.Container{{
				Name:    "main",
				Image:   "registry.local/train:1.0",
				Command: []string{"python", "train.py"},
				Env: []corev1.EnvVar{
					{Name: "S3_ENDPOINT", Value: "http://s3:9000"},
					{Name: "TEAM", Value: "cv"},
					{Name: "LR", Value: "$$(not-expanded)"},
					{Name: "DLC_JOB", Value: "resnet"},
					{Name: "DLC_JOB_UID", Value: "job-uid"},
					{Name: "DLC_WORKSPACE", Value: "vision"},
					{Name: "DLC_ATTEMPT", Value: "1"},
					{Name: "DLC_ROLE", Value: "worker"},
					{Name: "DLC_REPLICA", Value: "1"},
					{Name: "DLC_REPLICA_NAME", Value: "resnet-worker-1-a1"},
					{Name: "DLC_RESUME_FROM"},
					{Name: "DLC_PARAMS"},
					{Name: "MASTER_ADDR", Value: "master-0.resnet-a1.vision.svc"},
					{Name: "MASTER_PORT", Value: "23456"},
					{Name: "WORLD_SIZE", Value: "3"},
					{Name: "RANK", Value: "2"},
					{Name: "NODE_RANK", Value: "2"},
					{Name: "LOCAL_RANK", Value: "0"},
					{Name: "LOCAL_WORLD_SIZE", Value: "8"},
					{Name: "PET_MASTER_ADDR", Value: "master-0.resnet-a1.vision.svc"},
					{Name: "PET_MASTER_PORT", Value: "23456"},
					{Name: "PET_NNODES", Value: "3"},
					{Name: "PET_NODE_RANK", Value: "2"},
					{Name: "PET_NPROC_PER_NODE", Value: "8"},
					{Name: "KUBERNETES_CONTAINER_RESOURCE_GPU", Value: "8"},
					{Name: "PYTHONUNBUFFERED", Value: "1"},
					{Name: "NPROC_PER_NODE", Value: "8"},
				},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "s3-credentials"},
				}}},
				Ports:     []corev1.ContainerPort{{Name: "rendezvous", ContainerPort: 23456, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: gpuResources, Limits: gpuResources},
				// The image's user (no security context), and a 1Gi memory-backed /dev/shm.
				VolumeMounts:             []corev1.VolumeMount{{Name: "dshm", MountPath: "/dev/shm"}},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			NodeSelector: map[string]string{"gpu": "h100"},
			Tolerations: []corev1.Toleration{{
				Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
			}},
			TerminationGracePeriodSeconds: &grace,
			EnableServiceLinks:            new(false),
			AutomountServiceAccountToken:  new(false),
			Volumes: []corev1.Volume{{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("1Gi")),
			}}}},
		},
	}
	opts := cmp.Options{schemastest.CmpOpts, cmpopts.IgnoreTypes(metav1.TypeMeta{}), cmpopts.IgnoreFields(metav1.ObjectMeta{}, "UID", "ResourceVersion", "ManagedFields", "CreationTimestamp")}
	if diff := cmp.Diff(want, got["resnet-worker-1-a1"], opts); diff != "" {
		t.Errorf("pod (-want +got):\n%s", diff)
	}

	// The master: rank 0, no GPUs.
	master := got["resnet-master-0-a1"]
	env := envMap(master.Spec.Containers[0].Env)
	for k, v := range map[string]string{"RANK": "0", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "1", "DLC_ROLE": "master"} {
		if env[k] != v {
			t.Errorf("master %s = %q, want %q", k, env[k], v)
		}
	}
	if _, ok := master.Spec.Containers[0].Resources.Limits[ResourceGPU]; ok {
		t.Errorf("master has a GPU limit: %v", master.Spec.Containers[0].Resources.Limits)
	}
	if master.Spec.Hostname != "master-0" || master.Spec.NodeSelector != nil || master.Spec.Tolerations != nil {
		t.Errorf("master: hostname %q, nodeSelector %v, tolerations %v", master.Spec.Hostname, master.Spec.NodeSelector, master.Spec.Tolerations)
	}
}

func envMap(env []corev1.EnvVar) map[string]string {
	m := map[string]string{}
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

func TestLaunchOptions(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs,
		WithNamespacePrefix("dlc-"), WithRendezvousPort(29500), WithServiceAccount("trainer"),
		WithImagePullPolicy(corev1.PullIfNotPresent), WithImagePullSecrets("regcred"), WithRunAsUser(1000),
	)
	g := gangOf(t, schemastest.Job("mnist").Workspace("ml").Role("worker", 1))
	launch(t, b, g)
	p, err := cs.CoreV1().Pods("dlc-ml").Get(context.Background(), "mnist-worker-0-a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := envMap(p.Spec.Containers[0].Env)
	if env["MASTER_PORT"] != "29500" || env["MASTER_ADDR"] != "worker-0.mnist-a1.dlc-ml.svc" {
		t.Errorf("MASTER_ADDR:PORT = %s:%s", env["MASTER_ADDR"], env["MASTER_PORT"])
	}
	if p.Spec.ServiceAccountName != "trainer" || p.Spec.AutomountServiceAccountToken != nil {
		t.Errorf("service account %q, automount %v", p.Spec.ServiceAccountName, p.Spec.AutomountServiceAccountToken)
	}
	if c := p.Spec.Containers[0]; c.ImagePullPolicy != corev1.PullIfNotPresent || c.Resources.Limits != nil {
		t.Errorf("pull policy %q, limits %v", c.ImagePullPolicy, c.Resources.Limits)
	}
	if diff := cmp.Diff([]corev1.LocalObjectReference{{Name: "regcred"}}, p.Spec.ImagePullSecrets); diff != "" {
		t.Errorf("pull secrets (-want +got):\n%s", diff)
	}
	if u := p.Spec.SecurityContext.RunAsUser; u == nil || *u != 1000 {
		t.Errorf("runAsUser = %v", u)
	}
	if p.Spec.EnableServiceLinks == nil || *p.Spec.EnableServiceLinks {
		t.Errorf("service links enabled")
	}
}

func TestLaunchIsIdempotent(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	before := pods(t, cs, "vision")
	launch(t, b, g)
	// A new worker process: nothing in memory.
	launch(t, newUncachedBackend(t, cs), g)
	after := pods(t, cs, "vision")
	if len(after) != 3 {
		t.Fatalf("got %d pods after three launches, want 3", len(after))
	}
	for name, p := range before {
		if after[name].UID != p.UID {
			t.Errorf("pod %s was recreated", name)
		}
	}
	creates := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == "pods" {
			creates++
		}
	}
	if creates != 9 {
		t.Errorf("%d pod creates, want 9 (three launches, AlreadyExists twice)", creates)
	}
}

func TestLaunchRefusesAnotherGangsObjects(t *testing.T) {
	tests := map[string]func(cs *fake.Clientset){
		"service": func(cs *fake.Clientset) {
			_, _ = cs.CoreV1().Services("vision").Create(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{
				Name: "resnet-a1", Namespace: "vision", Labels: map[string]string{LabelGang: "other"},
			}}, metav1.CreateOptions{})
		},
		"pod": func(cs *fake.Clientset) {
			_, _ = cs.CoreV1().Pods("vision").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "resnet-worker-0-a1", Namespace: "vision", Labels: map[string]string{LabelGang: "other"},
			}}, metav1.CreateOptions{})
		},
	}
	for name, setup := range tests {
		t.Run(name, func(t *testing.T) {
			cs := newClient()
			setup(cs)
			err := newBackend(t, cs).Launch(context.Background(), gangOf(t, ddp("resnet")))
			if !errors.Is(err, backend.ErrInvalidSpec) || !strings.Contains(err.Error(), `"other"`) {
				t.Fatalf("Launch = %v, want an InvalidSpec error naming the other gang", err)
			}
		})
	}
}

func TestLaunchInvalidSpec(t *testing.T) {
	long := strings.Repeat("r", 62) // with "-0": one past a DNS label's 63
	tests := map[string]func(g *backend.GangSpec){
		"no image":          func(g *backend.GangSpec) { g.Image = "" },
		"unknown framework": func(g *backend.GangSpec) { g.Framework = "caffe" },
		"bad pod name":      func(g *backend.GangSpec) { g.Replicas[0].Name = "Not_A_Name" },
		"duplicate name":    func(g *backend.GangSpec) { g.Replicas[1].Name = g.Replicas[0].Name },
		"long role":         func(g *backend.GangSpec) { g.Replicas[0].Role = long },
		"empty command":     func(g *backend.GangSpec) { g.Replicas[0].Command = nil },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			cs := newClient()
			g := gangOf(t, ddp("resnet"))
			mutate(&g)
			err := newUncachedBackend(t, cs).Launch(context.Background(), g)
			if !errors.Is(err, backend.ErrInvalidSpec) {
				t.Fatalf("Launch = %v, want an InvalidSpec error", err)
			}
			if n := len(cs.Actions()); n != 0 {
				t.Errorf("%d API requests for an invalid spec, want none", n)
			}
		})
	}
}

func TestLaunchWithoutNamespaceCreation(t *testing.T) {
	cs := newClient()
	launch(t, newBackend(t, cs, WithCreateNamespaces(false)), gangOf(t, ddp("resnet")))
	for _, a := range cs.Actions() {
		if a.GetResource().Resource == "namespaces" {
			t.Errorf("unexpected %s namespaces", a.GetVerb())
		}
	}
}

func TestLaunchAfterStopCreatesNothing(t *testing.T) {
	cs := newClient()
	g := gangOf(t, ddp("resnet"))
	b := newBackend(t, cs)
	launch(t, b, g)
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatal(err)
	}
	launch(t, b, g)
	launch(t, newUncachedBackend(t, cs), g) // another worker: learns it from the Service
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods after Launch following Stop, want 0", n)
	}
}

// A Stop by another worker that marks the Service while Launch is creating pods may
// list the pods before Launch has created them all; Launch then deletes what it made.
func TestLaunchRacingStopDeletesItsPods(t *testing.T) {
	cs := newClient()
	g := gangOf(t, ddp("resnet"))
	svcs := corev1.SchemeGroupVersion.WithResource("services")
	cs.PrependReactor("create", "pods", func(_ k8stesting.Action) (bool, runtime.Object, error) {
		// The other worker's Stop lands while pods are being created. Through the
		// tracker: the clientset is locked while a reactor runs.
		obj, err := cs.Tracker().Get(svcs, "vision", "resnet-a1")
		if err != nil {
			return true, nil, err
		}
		svc := obj.(*corev1.Service)
		if svc.Annotations[AnnotationStopped] == "" {
			svc.Annotations[AnnotationStopped] = "true"
			if err := cs.Tracker().Update(svcs, svc, "vision"); err != nil {
				return true, nil, err
			}
		}
		return false, nil, nil
	})
	launch(t, newBackend(t, cs), g)
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods left, want 0", n)
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("a", 50)
	tests := map[string]struct {
		ref             backend.GangRef
		prefix          string
		wantSvc, wantNS string
	}{
		"plain":       {ref: backend.GangRef{Workspace: "vision", Job: "resnet", Attempt: 3}, wantSvc: "resnet-a3", wantNS: "vision"},
		"prefix":      {ref: backend.GangRef{Workspace: "vision", Job: "resnet"}, prefix: "dlc-", wantSvc: "resnet-a0", wantNS: "dlc-vision"},
		"digit first": {ref: backend.GangRef{Workspace: "v", Job: "7b-sft", Attempt: 1}, wantSvc: "j-7b-sft-a1", wantNS: "v"},
		"long job":    {ref: backend.GangRef{Workspace: "v", Job: long + "-0123456789ab", Attempt: 12}, wantSvc: shorten(long+"-0123456789ab-a12", 63), wantNS: "v"},
		"long ns":     {ref: backend.GangRef{Workspace: strings.Repeat("w", 40), Job: "j"}, prefix: strings.Repeat("p", 30), wantSvc: "j-a0", wantNS: shorten(strings.Repeat("p", 30)+strings.Repeat("w", 40), 63)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t, newClient(), WithNamespacePrefix(tt.prefix))
			svc, ns := serviceName(tt.ref), b.namespace(tt.ref.Workspace)
			if svc != tt.wantSvc || ns != tt.wantNS {
				t.Errorf("service %q namespace %q, want %q %q", svc, ns, tt.wantSvc, tt.wantNS)
			}
			if errs := validation.IsDNS1035Label(svc); len(errs) > 0 {
				t.Errorf("service name %q: %v", svc, errs)
			}
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				t.Errorf("namespace %q: %v", ns, errs)
			}
			if errs := validation.IsValidLabelValue(gangValue(tt.ref)); len(errs) > 0 {
				t.Errorf("gang label %q: %v", gangValue(tt.ref), errs)
			}
		})
	}
	if a, b := shorten(long+"x1", 40), shorten(long+"x2", 40); a == b || len(a) != 40 {
		t.Errorf("shorten: %q and %q", a, b)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := map[string]Option{
		"prefix":      WithNamespacePrefix("DLC_"),
		"port":        WithRendezvousPort(0),
		"secret":      WithEnvFromSecret("Bad Name"),
		"pull policy": WithImagePullPolicy("Sometimes"),
		"root":        WithRunAsUser(0),
		"grace":       WithStopGracePeriod(-1),
		"poll":        WithPollInterval(0),
	}
	for name, o := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := New(newClient(), o); err == nil {
				t.Error("New accepted it")
			}
		})
	}
	if _, err := New(nil); err == nil {
		t.Error("New accepted a nil client")
	}
}

func TestRESTConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	path := t.TempDir() + "/kubeconfig"
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: secret}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := RESTConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "secret" || cfg.QPS != 50 || cfg.Burst != 100 {
		t.Errorf("config: host %q token %q qps %v burst %d", cfg.Host, cfg.BearerToken, cfg.QPS, cfg.Burst)
	}
	if _, err := RESTConfig(t.TempDir() + "/missing"); err == nil {
		t.Error("RESTConfig accepted a missing file")
	}
}

// In a namespace created moments ago, pods are refused until the controller manager has
// created its default service account.
func TestLaunchWaitsForTheServiceAccount(t *testing.T) {
	cs := newClient()
	var refusals atomic.Int32
	cs.PrependReactor("create", "pods", func(_ k8stesting.Action) (bool, runtime.Object, error) {
		if refusals.Add(1) <= 3 {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "x",
				errors.New(`error looking up service account vision/default: serviceaccount "default" not found`))
		}
		return false, nil, nil
	})
	launch(t, newBackend(t, cs), gangOf(t, ddp("resnet")))
	if n := len(pods(t, cs, "vision")); n != 3 {
		t.Errorf("%d pods, want 3", n)
	}
}
