package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
)

// ResourceGPU is the extended resource a replica's GPUs are requested as.
const ResourceGPU corev1.ResourceName = "nvidia.com/gpu"

// CreateParallelism bounds the pod creations in flight per Launch: a 64-pod gang is
// created in a few round trips without flooding the API server. (`task bench:kube`'s
// client-go baseline creates its pods with the same bound.)
const CreateParallelism = 8

// replicaRef is one entry of AnnotationReplicas.
type replicaRef struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Index int    `json:"index"`
}

// Launch creates the gang's namespace (if allowed and missing), its headless Service,
// then every pod that does not exist yet. Objects that exist already count as created,
// unless they belong to another gang (a name collision: an InvalidSpec error). A Launch
// after Stop creates nothing: Stop is final for an attempt.
func (b *Backend) Launch(ctx context.Context, g backend.GangSpec) error {
	fw, err := frameworks.Get(g.Framework)
	if err != nil {
		return backend.InvalidSpec(err)
	}
	if err := validate(g); err != nil {
		return backend.InvalidSpec(err)
	}
	// Every spec problem surfaces before the first request.
	ns := b.namespaceOf(g.GangRef)
	ports := b.ports(fw.PortNames())
	ep := endpoints{svc: serviceName(g.GangRef), ns: ns, ports: ports}
	fwEnvs := make([][]schemas.EnvVar, len(g.Replicas))
	for i, r := range g.Replicas {
		if fwEnvs[i], err = frameworks.EnvFor(g, r, ep); err != nil {
			return backend.InvalidSpec(err)
		}
	}
	mounts := gangMounts{ssh: frameworks.LaunchesOverSSH(g.Framework)}
	if mounts.filesDir, mounts.files, err = frameworks.FilesFor(g, ep); err != nil {
		return backend.InvalidSpec(err)
	}
	reserved := []string{mounts.filesDir}
	if mounts.ssh {
		reserved = append(reserved, b.sshPathFor(g))
	}
	if err := validatePodOptions(g, reserved...); err != nil {
		return backend.InvalidSpec(fmt.Errorf("kube: %w", err))
	}
	if err := b.checkPolicy(g); err != nil {
		return backend.InvalidSpec(fmt.Errorf("kube: %w", err))
	}
	if err := b.allowNamespace(ns); err != nil {
		return err
	}

	b.cache.start()
	release, err := b.takeLaunchSlot(ctx)
	if err != nil {
		return err
	}
	defer release()
	id := g.ID()
	l := b.lockGang(id)
	defer l.Unlock()
	if b.stoppedHere(id) {
		return nil
	}
	build := func(svc *corev1.Service) []*corev1.Pod {
		pods := make([]*corev1.Pod, len(g.Replicas))
		for i, r := range g.Replicas {
			pods[i] = b.podFor(g, r, svc, fwEnvs[i], ports, mounts)
		}
		return pods
	}
	// A gang that can never fit is told so before anything is created.
	if err := b.checkFit(ctx, g, ns, build); err != nil {
		return err
	}
	if err := b.ensureNamespace(ctx, ns, g.Workspace); err != nil {
		return err
	}
	s3Env, err := b.ensureS3Secret(ctx, ns, g.Workspace)
	if err != nil {
		return err
	}
	svc, err := b.ensureService(ctx, ns, g, ports)
	if err != nil {
		return err
	}
	if svc.Annotations[AnnotationStopped] != "" {
		return nil
	}
	if err := b.ensureGangObjects(ctx, g, svc, mounts); err != nil {
		return err
	}
	if err := b.ensureGangGroup(ctx, g, svc); err != nil {
		return err
	}

	pods := build(svc)
	for i, r := range g.Replicas {
		withS3Env(&pods[i].Spec.Containers[0], s3Env, r.Env)
		b.addBatchScheduling(g, pods[i])
	}
	// The first error in replica order, typed errors intact.
	if err := forEachPod(pods, CreateParallelism, func(pod *corev1.Pod) error { return b.createPod(ctx, pod) }); err != nil {
		return err
	}

	// Mark the gang launched, and read the stopped mark in the same (linearizable)
	// write: if no Stop had marked the Service before this patch, any Stop marks it
	// after our pods exist and will find them all. If one had, it may have listed the
	// pods before we created some, so delete them here.
	patched, err := b.annotateService(ctx, ns, svc.Name, AnnotationLaunched)
	if err != nil {
		return err
	}
	if patched != nil && patched.Annotations[AnnotationStopped] != "" {
		if _, err := b.deleteRunning(ctx, ns, g.GangRef, b.grace); err != nil {
			return err
		}
		return b.deleteGangGroups(ctx, ns, g.GangRef)
	}
	return nil
}

// validate refuses gangs that cannot become pods.
func validate(g backend.GangSpec) error {
	if g.Image == "" {
		return errors.New("kube: the job has no image")
	}
	if len(g.Replicas) == 0 {
		return errors.New("kube: the gang has no replicas")
	}
	if errs := validation.IsDNS1123Label(shorten(g.Workspace, maxLabel)); g.Workspace == "" || len(errs) > 0 {
		return fmt.Errorf("kube: workspace %q cannot name a namespace: %s", g.Workspace, strings.Join(errs, "; "))
	}
	if g.Job == "" || g.Attempt < 0 {
		return fmt.Errorf("kube: invalid gang %s", g.ID())
	}
	names := map[string]bool{}
	hosts := map[string]bool{}
	for i, r := range g.Replicas {
		host := hostname(r.Role, r.Index)
		switch {
		case len(validation.IsDNS1123Subdomain(r.Name)) > 0:
			return fmt.Errorf("kube: replicas[%d].name %q is not a valid pod name: %s", i, r.Name, strings.Join(validation.IsDNS1123Subdomain(r.Name), "; "))
		case names[r.Name]:
			return fmt.Errorf("kube: replicas[%d].name %q is used twice", i, r.Name)
		case r.Index < 0 || len(validation.IsDNS1123Label(host)) > 0:
			return fmt.Errorf("kube: replicas[%d] (%s): hostname %q is not a DNS label", i, r.Name, host)
		case hosts[host]:
			return fmt.Errorf("kube: replicas[%d] (%s): role %q index %d is used twice", i, r.Name, r.Role, r.Index)
		case len(validation.IsValidLabelValue(r.Role)) > 0:
			return fmt.Errorf("kube: replicas[%d] (%s): role %q is not a valid label value", i, r.Name, r.Role)
		case len(r.Command) == 0 || r.Command[0] == "":
			return fmt.Errorf("kube: replicas[%d] (%s): empty command", i, r.Name)
		}
		names[r.Name], hosts[host] = true, true
	}
	return nil
}

// ensureNamespace creates ns unless it is known to exist. Create rather than get then
// create: one request, and the worker needs no permission to read namespaces.
func (b *Backend) ensureNamespace(ctx context.Context, ns, workspace string) error {
	if !b.createNamespaces {
		return nil
	}
	b.mu.Lock()
	known := b.namespaces[ns]
	b.mu.Unlock()
	if known {
		return nil
	}
	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   ns,
		Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelWorkspace: shorten(workspace, maxLabel)},
	}}
	_, err := b.client.CoreV1().Namespaces().Create(ctx, obj, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube: create namespace %s: %w", ns, err)
	}
	b.mu.Lock()
	b.namespaces[ns] = true
	b.mu.Unlock()
	return nil
}

// ensureService creates the gang's Service, or returns the existing one if it is this
// gang's.
func (b *Backend) ensureService(ctx context.Context, ns string, g backend.GangSpec, ports []namedPort) (*corev1.Service, error) {
	want := serviceFor(ns, g, ports)
	svc, err := b.client.CoreV1().Services(ns).Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		return svc, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		if apierrors.IsNotFound(err) {
			// The namespace was deleted since we created it: let the retry recreate it.
			b.mu.Lock()
			delete(b.namespaces, ns)
			b.mu.Unlock()
		}
		return nil, fmt.Errorf("kube: create service %s/%s: %w", ns, want.Name, err)
	}
	// Read the server, not the cache: we need its current stopped mark.
	svc, err = b.client.CoreV1().Services(ns).Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		// Deleted since (a concurrent Cleanup): a retry creates it again.
		return nil, fmt.Errorf("kube: get service %s/%s: %w", ns, want.Name, err)
	}
	if got := svc.Labels[LabelGang]; got != want.Labels[LabelGang] {
		return nil, backend.InvalidSpec(fmt.Errorf("kube: service %s/%s belongs to gang %q, not %q", ns, svc.Name, got, want.Labels[LabelGang]))
	}
	return svc, nil
}

// serviceFor is the gang's headless Service. publishNotReadyAddresses, because replicas
// must resolve each other before any is ready: rendezvous is how they get ready.
func serviceFor(ns string, g backend.GangSpec, ports []namedPort) *corev1.Service {
	refs := make([]replicaRef, len(g.Replicas))
	for i, r := range g.Replicas {
		refs[i] = replicaRef{Name: r.Name, Role: r.Role, Index: r.Index}
	}
	list, _ := json.Marshal(refs) // strings and ints: cannot fail
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        serviceName(g.GangRef),
			Namespace:   ns,
			Labels:      gangLabels(g),
			Annotations: map[string]string{AnnotationReplicas: string(list)},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			Selector:                 map[string]string{LabelManagedBy: ManagedByValue, LabelGang: gangValue(g.GangRef)},
			PublishNotReadyAddresses: true,
		},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: p.name, Port: int32(p.port), TargetPort: intstr.FromInt32(int32(p.port)), Protocol: corev1.ProtocolTCP,
		})
	}
	return svc
}

// serviceAccountWait bounds how long Launch retries pods refused because the
// namespace's service account does not exist yet.
const serviceAccountWait = 15 * time.Second

// createPod creates pod; an existing pod of the same gang counts as created.
func (b *Backend) createPod(ctx context.Context, pod *corev1.Pod) error {
	deadline := b.clock.Now().Add(serviceAccountWait)
	var err error
	for {
		_, err = b.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		// In a namespace created moments ago, the controller manager may not have
		// created the "default" service account yet, and admission refuses pods until
		// it has. It takes milliseconds: wait here rather than fail the activity.
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "service account") || b.clock.Now().After(deadline) {
			break
		}
		if werr := b.wait(ctx, nil, 100*time.Millisecond); werr != nil {
			return werr
		}
	}
	if err == nil {
		return nil
	}
	if refusedAsWritten(err) {
		return backend.InvalidSpec(fmt.Errorf("kube: create pod %s/%s: %w", pod.Namespace, pod.Name, err))
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube: create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	got, err := b.cache.pod(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	if got == nil {
		// Deleted between our create and our read (a concurrent Stop or Cleanup): it
		// was created, which is all Launch promises.
		return nil
	}
	if g := got.Labels[LabelGang]; g != pod.Labels[LabelGang] {
		return backend.InvalidSpec(fmt.Errorf("kube: pod %s/%s belongs to gang %q, not %q", pod.Namespace, pod.Name, g, pod.Labels[LabelGang]))
	}
	return nil
}

// refusedAsWritten reports whether the API server refused a pod for what it is, so
// that retrying the same pod cannot succeed: invalid (422), or forbidden by the
// namespace's Pod Security level.
func refusedAsWritten(err error) bool {
	return apierrors.IsInvalid(err) || (apierrors.IsForbidden(err) && strings.Contains(err.Error(), "violates PodSecurity"))
}

// annotateService sets annotation key to "true" on the Service and returns the patched
// Service; nil when the Service no longer exists.
func (b *Backend) annotateService(ctx context.Context, ns, name, key string) (*corev1.Service, error) {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: "true"}}})
	svc, err := b.client.CoreV1().Services(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kube: annotate service %s/%s: %w", ns, name, err)
	}
	return svc, nil
}

// podFor is the pod of replica r.
func (b *Backend) podFor(g backend.GangSpec, r backend.ReplicaSpec, svc *corev1.Service, fwEnv []schemas.EnvVar, ports []namedPort, m gangMounts) *corev1.Pod {
	labels := gangLabels(g)
	labels[LabelRole] = r.Role
	labels[LabelReplicaIndex] = strconv.Itoa(r.Index)
	// The job's annotations reach its pods (sidecar injection, schedulers, kwok
	// stages in tests); the backend's own annotations win.
	var annotations map[string]string
	if len(g.Annotations)+len(b.podAnnotations) > 0 {
		annotations = maps.Clone(g.Annotations)
		if annotations == nil {
			annotations = map[string]string{}
		}
		maps.Copy(annotations, b.podAnnotations)
	}
	grace := int64(b.grace.Seconds())

	c := corev1.Container{
		Name:            ContainerName,
		Image:           g.Image,
		ImagePullPolicy: b.pullPolicy,
		Command:         escapeAll(frameworks.CommandFor(g, r)),
		WorkingDir:      r.WorkingDir,
		Env:             withPodIP(podEnv(b.env, r.Env, fwEnv), fwEnv),
		Resources:       resources(r.Resources),
		// The kubelet reads the last lines of output into the status when the
		// container fails: the reason a failed replica shows without its logs.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: p.name, ContainerPort: int32(p.port), Protocol: corev1.ProtocolTCP})
	}
	if b.envSecret != "" {
		c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: b.envSecret},
		}}}
	}
	for _, d := range g.Data {
		if d.SecretRef != "" {
			c.Env = append(c.Env, dataSecretEnv(d)...)
		}
		if d.PVC != nil {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{
				Name: dataVolumeName(d.Name), MountPath: d.MountPath, ReadOnly: d.PVC.ReadOnly,
			})
		}
	}
	for _, name := range g.EnvFromSecrets {
		c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: name},
		}})
	}

	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		Hostname:                      hostname(r.Role, r.Index),
		Subdomain:                     svc.Name,
		Containers:                    []corev1.Container{c},
		NodeSelector:                  maps.Clone(r.NodeSelector),
		Tolerations:                   tolerations(r.Tolerations),
		TerminationGracePeriodSeconds: &grace,
		// Service links would put a variable per Service in the namespace into every
		// replica's environment: one set per gang, growing with the workspace's jobs.
		EnableServiceLinks: new(false),
	}
	spec.SecurityContext, spec.Containers[0].SecurityContext = b.securityContexts(b.securityFor(g))
	spec.HostNetwork = g.Pod != nil && g.Pod.HostNetwork
	if spec.HostNetwork {
		// Keep cluster DNS: replicas find each other by their Service names.
		spec.DNSPolicy = corev1.DNSClusterFirstWithHostNet
	}
	// The job's resource pool adds its node selector (which wins over the replica's:
	// a spot job must land on spot nodes), its tolerations and its priority class.
	if pc, ok := b.pools[g.Pool]; ok {
		if len(pc.NodeSelector) > 0 && spec.NodeSelector == nil {
			spec.NodeSelector = map[string]string{}
		}
		maps.Copy(spec.NodeSelector, pc.NodeSelector)
		spec.Tolerations = append(spec.Tolerations, pc.Tolerations...)
		spec.PriorityClassName = pc.PriorityClassName
	}
	for _, d := range g.Data {
		if d.PVC != nil {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: dataVolumeName(d.Name), VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: d.PVC.ClaimName, ReadOnly: d.PVC.ReadOnly},
			}})
		}
	}
	if len(g.ExcludeNodes) > 0 {
		// Keep a restarted attempt off the nodes that failed it or failed their
		// health check. A matchFields requirement on metadata.name takes exactly one
		// value (the API server refuses more), so each node is a requirement of its
		// own; the requirements of one term must all hold.
		var notOn []corev1.NodeSelectorRequirement
		for _, n := range g.ExcludeNodes {
			notOn = append(notOn, corev1.NodeSelectorRequirement{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{n},
			})
		}
		spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: notOn}},
			},
		}}
	}
	mountGangObjects(&spec, &spec.Containers[0], svc.Name, m, b.sshPathFor(g))
	b.addPodVolumes(g, &spec, &spec.Containers[0])
	if sa := b.serviceAccountFor(g); sa != "" {
		spec.ServiceAccountName = sa
	} else {
		spec.AutomountServiceAccountToken = new(false)
	}
	spec.ImagePullSecrets = b.pullSecretsFor(g)

	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            r.Name,
			Namespace:       svc.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: ownedBy(svc),
		},
		Spec: spec,
	}
}

// podEnv merges the environment lists, later lists overriding earlier ones by name,
// each name at the place it first appeared. Kubernetes keeps duplicates (the last one
// wins, with a warning); one entry per name is clearer in `kubectl describe`.
func podEnv(lists ...[]schemas.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	at := map[string]int{}
	for _, list := range lists {
		for _, e := range list {
			v := escape(e.Value)
			if i, ok := at[e.Name]; ok {
				out[i].Value = v
				continue
			}
			at[e.Name] = len(out)
			out = append(out, corev1.EnvVar{Name: e.Name, Value: v})
		}
	}
	return out
}

// withPodIP gives a container whose framework environment sets frameworks.EnvPodIP
// (PaddleJob's POD_IP_DUMMY) that variable from the pod's status.podIP, first in env
// so that the kubelet expands the framework's references to it
// (frameworks.PodIPRef, which escape doubled) in the variables after it, as PaddleJob
// sets PADDLE_MASTER="$(POD_IP_DUMMY):port". Other containers' env is returned as is.
func withPodIP(env []corev1.EnvVar, fwEnv []schemas.EnvVar) []corev1.EnvVar {
	if !slices.ContainsFunc(fwEnv, func(e schemas.EnvVar) bool { return e.Name == frameworks.EnvPodIP }) {
		return env
	}
	out := []corev1.EnvVar{{Name: frameworks.EnvPodIP, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
	}}}
	for _, e := range env {
		if e.Name == frameworks.EnvPodIP {
			continue
		}
		if slices.ContainsFunc(fwEnv, func(f schemas.EnvVar) bool { return f.Name == e.Name }) {
			// The framework's value, the last list podEnv merged: only it refers to
			// EnvPodIP on purpose.
			e.Value = strings.ReplaceAll(e.Value, escape(frameworks.PodIPRef), frameworks.PodIPRef)
		}
		out = append(out, e)
	}
	return out
}

// escape protects s from the kubelet's $(VAR) expansion of commands and env values, so
// a replica sees exactly what the local backend would give it: "$$" is the kubelet's
// escape for "$".
func escape(s string) string { return strings.ReplaceAll(s, "$", "$$") }

func escapeAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = escape(s)
	}
	return out
}

// resources requests what the replica asks for and limits it to the same, so training
// pods get the Guaranteed QoS class (last to be evicted under node pressure). GPUs are
// an extended resource, which Kubernetes requires to have requests equal to limits.
func resources(r schemas.Resources) corev1.ResourceRequirements {
	list := corev1.ResourceList{}
	if r.CPU != nil && !r.CPU.IsZero() {
		list[corev1.ResourceCPU] = r.CPU.DeepCopy()
	}
	if r.Memory != nil && !r.Memory.IsZero() {
		list[corev1.ResourceMemory] = r.Memory.DeepCopy()
	}
	if r.GPU > 0 {
		list[ResourceGPU] = *resource.NewQuantity(int64(r.GPU), resource.DecimalSI)
	}
	for name, q := range r.Extended {
		list[corev1.ResourceName(name)] = q.DeepCopy()
	}
	if len(list) == 0 {
		return corev1.ResourceRequirements{}
	}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}

func tolerations(ts []schemas.Toleration) []corev1.Toleration {
	if len(ts) == 0 {
		return nil
	}
	out := make([]corev1.Toleration, len(ts))
	for i, t := range ts {
		out[i] = corev1.Toleration{
			Key:      t.Key,
			Operator: corev1.TolerationOperator(t.Operator),
			Value:    t.Value,
			Effect:   corev1.TaintEffect(t.Effect),
		}
	}
	return out
}

// namedPort is one of a gang's ports.
type namedPort struct {
	key  string // the framework's name for it
	name string // its name in the Service and pod spec
	port int
}

// ports assigns the framework's named ports: the rendezvous port is the configured one,
// a port with a conventional number (frameworks.DefaultPort: Ray's GCS on 6379) has that
// number unless another port of the gang has it, and the others follow the rendezvous
// port in PortNames order. Every pod has its own IP, so every gang can use the same
// numbers. The rendezvous port is always published, whether the framework names it or
// not, so a custom program has a known port too.
func (b *Backend) ports(names []string) []namedPort {
	out := []namedPort{{key: frameworks.PortRendezvous, name: frameworks.PortRendezvous, port: b.port}}
	taken := map[int]bool{b.port: true}
	next := b.port + 1
	for _, n := range names {
		if n == frameworks.PortRendezvous {
			continue
		}
		port := frameworks.DefaultPort(n)
		if port == 0 || taken[port] {
			for taken[next] {
				next++
			}
			port = next
		}
		taken[port] = true
		out = append(out, namedPort{key: n, name: portName(n, len(out)), port: port})
	}
	return out
}

// portName is n if Kubernetes accepts it as a port name (at most 15 characters), else
// a positional name.
func portName(n string, i int) string {
	if len(validation.IsValidPortName(n)) == 0 {
		return n
	}
	return "port-" + strconv.Itoa(i)
}

// endpoints are the gang's addresses in the cluster's DNS.
type endpoints struct {
	svc, ns string
	ports   []namedPort
}

// Host returns <role>-<index>.<service>.<namespace>.svc: the headless Service's record
// for the pod with that hostname and subdomain. Qualified with the namespace so the name
// means the same wherever it is resolved, and without the cluster domain, which the pods'
// DNS search path supplies whatever it is.
func (e endpoints) Host(role string, index int) string {
	return hostname(role, index) + "." + e.svc + "." + e.ns + ".svc"
}

// SelfIP returns frameworks.PodIPRef: a pod learns its IP only when it runs, so the
// variable that holds it comes from status.podIP (see withPodIP).
func (endpoints) SelfIP() string { return frameworks.PodIPRef }

// Port returns the port allocated under name, or 0.
func (e endpoints) Port(name string) int {
	for _, p := range e.ports {
		if p.key == name {
			return p.port
		}
	}
	return 0
}

// dataVolumeName is the pod volume of a PVC data source.
func dataVolumeName(name string) string { return "data-" + name }

// dataSecretEnv passes an S3 data source's credentials from its Secret: the access key
// pair is required (the pod does not start without it, a config error the job reports),
// the endpoint and region are optional.
func dataSecretEnv(d schemas.DataSource) []corev1.EnvVar {
	prefix := backend.DataEnvName(d.Name)
	ref := func(env, key string, optional bool) corev1.EnvVar {
		return corev1.EnvVar{Name: prefix + env, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: d.SecretRef}, Key: key, Optional: new(optional),
		}}}
	}
	return []corev1.EnvVar{
		ref("_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID", false),
		ref("_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", false),
		ref("_ENDPOINT", "AWS_ENDPOINT_URL", true),
		ref("_REGION", "AWS_REGION", true),
	}
}
