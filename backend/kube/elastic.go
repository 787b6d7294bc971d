package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
)

// Elastic gangs (backend.Elastic), as Kubeflow's training-operator runs an elastic
// PyTorchJob: every replica is a pod of its own under the gang's headless Service, and
// torchrun's c10d rendezvous (PET_RDZV_*) lets pods join and leave, so scaling or
// replacing one pod leaves the others alone (same pod, same UID). The Service's
// AnnotationReplicas is the gang's replica list: ScaleGang rewrites it, so Observe
// reports the replicas the gang has now.

var _ backend.Elastic = (*Backend)(nil)

// replaceWait bounds how long ReplaceReplica waits for the old pod to be gone before it
// creates the new one under the same name.
const replaceWait = 2 * time.Minute

// elasticPlan is what creating a replica's pod needs, worked out as Launch does.
type elasticPlan struct {
	ns     string
	ports  []namedPort
	ep     endpoints
	mounts gangMounts
}

func (b *Backend) elasticPlan(g backend.GangSpec) (elasticPlan, error) {
	fw, err := frameworks.Get(g.Framework)
	if err != nil {
		return elasticPlan{}, backend.InvalidSpec(err)
	}
	if err := validate(g); err != nil {
		return elasticPlan{}, backend.InvalidSpec(err)
	}
	p := elasticPlan{ns: b.namespaceOf(g.GangRef), ports: b.ports(fw.PortNames())}
	p.ep = endpoints{svc: serviceName(g.GangRef), ns: p.ns, ports: p.ports}
	p.mounts = gangMounts{ssh: frameworks.LaunchesOverSSH(g.Framework)}
	if p.mounts.filesDir, p.mounts.files, err = frameworks.FilesFor(g, p.ep); err != nil {
		return elasticPlan{}, backend.InvalidSpec(err)
	}
	return p, b.allowNamespace(p.ns)
}

// ScaleGang rewrites the gang's replica list on its Service, deletes the pods of the
// replicas g no longer has and creates those of the replicas it adds. A stopped gang is
// left alone.
func (b *Backend) ScaleGang(ctx context.Context, g backend.GangSpec) error {
	p, err := b.elasticPlan(g)
	if err != nil {
		return err
	}
	return b.withLiveService(ctx, p.ns, g.GangRef, func(svc *corev1.Service) error { return b.scale(ctx, g, p, svc) })
}

// scale is ScaleGang with the gang locked and its live Service read.
func (b *Backend) scale(ctx context.Context, g backend.GangSpec, p elasticPlan, svc *corev1.Service) error {
	var had []replicaRef
	if err := json.Unmarshal([]byte(svc.Annotations[AnnotationReplicas]), &had); err != nil {
		return fmt.Errorf("kube: service %s/%s: bad %s annotation: %w", p.ns, svc.Name, AnnotationReplicas, err)
	}
	refs := make([]replicaRef, len(g.Replicas))
	keep := map[string]bool{}
	for i, r := range g.Replicas {
		refs[i] = replicaRef{Name: r.Name, Role: r.Role, Index: r.Index}
		keep[r.Name] = true
	}
	list, _ := json.Marshal(refs) // strings and ints: cannot fail
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{AnnotationReplicas: string(list)}}})
	svc, err := b.client.CoreV1().Services(p.ns).Patch(ctx, svc.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("kube: scale %s: patch service: %w", g.ID(), err)
	}
	existed := map[string]bool{}
	for _, r := range had {
		existed[r.Name] = true
		if keep[r.Name] {
			continue
		}
		if err := b.deleteReplicaPod(ctx, p.ns, r.Name, b.grace); err != nil {
			return err
		}
	}
	for _, r := range g.Replicas {
		if existed[r.Name] {
			continue
		}
		if err := b.createReplicaPod(ctx, g, r, svc, p); err != nil {
			return err
		}
	}
	return nil
}

// ReplaceReplica deletes what is left of the replica's pod, waits until it is gone,
// and creates it again under the same name (a new UID); the other pods are left alone.
func (b *Backend) ReplaceReplica(ctx context.Context, g backend.GangSpec, replica string) error {
	p, err := b.elasticPlan(g)
	if err != nil {
		return err
	}
	var rs *backend.ReplicaSpec
	for i := range g.Replicas {
		if g.Replicas[i].Name == replica {
			rs = &g.Replicas[i]
		}
	}
	if rs == nil {
		return backend.InvalidSpec(fmt.Errorf("kube: gang %s has no replica %s", g.ID(), replica))
	}
	return b.withLiveService(ctx, p.ns, g.GangRef, func(svc *corev1.Service) error { return b.replace(ctx, g, p, svc, *rs) })
}

// replace is ReplaceReplica with the gang locked and its live Service read.
func (b *Backend) replace(ctx context.Context, g backend.GangSpec, p elasticPlan, svc *corev1.Service, rs backend.ReplicaSpec) error {
	replica := rs.Name
	if err := b.deleteReplicaPod(ctx, p.ns, replica, 0); err != nil {
		return err
	}
	deadline := b.clock.Now().Add(replaceWait)
	for {
		_, err := b.client.CoreV1().Pods(p.ns).Get(ctx, replica, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil {
			return fmt.Errorf("kube: replace %s: %w", replica, err)
		}
		if !b.clock.Now().Before(deadline) {
			return fmt.Errorf("kube: replace %s: the old pod was not gone after %s", replica, replaceWait)
		}
		if err := b.wait(ctx, b.changesOf(p.ns, g.GangRef), 200*time.Millisecond); err != nil {
			return err
		}
	}
	return b.createReplicaPod(ctx, g, rs, svc, p)
}

// withLiveService runs fn with the gang locked and its live Service (see liveService);
// it does nothing when the gang was stopped.
func (b *Backend) withLiveService(ctx context.Context, ns string, ref backend.GangRef, fn func(*corev1.Service) error) error {
	b.cache.start()
	l := b.lockGang(ref.ID())
	defer l.Unlock()
	svc, stopped, err := b.liveService(ctx, ns, ref)
	if err != nil || stopped {
		return err
	}
	return fn(svc)
}

// liveService reads the gang's Service from the API server; stopped is set when the
// gang was stopped (nothing may be created for it any more).
func (b *Backend) liveService(ctx context.Context, ns string, ref backend.GangRef) (*corev1.Service, bool, error) {
	if b.stoppedHere(ref.ID()) {
		return nil, true, nil
	}
	svc, err := b.client.CoreV1().Services(ns).Get(ctx, serviceName(ref), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, fmt.Errorf("%w: %s (namespace %s)", backend.ErrGangNotFound, ref.ID(), ns)
	}
	if err != nil {
		return nil, false, fmt.Errorf("kube: get service %s/%s: %w", ns, serviceName(ref), err)
	}
	if svc.Labels[LabelGang] != gangValue(ref) {
		return nil, false, backend.InvalidSpec(fmt.Errorf("kube: service %s/%s belongs to gang %q", ns, svc.Name, svc.Labels[LabelGang]))
	}
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	return svc, svc.Annotations[AnnotationStopped] != "", nil
}

// deleteReplicaPod deletes a replica's pod, if it exists.
func (b *Backend) deleteReplicaPod(ctx context.Context, ns, name string, grace time.Duration) error {
	pod, err := b.client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kube: get pod %s/%s: %w", ns, name, err)
	}
	return b.deletePod(ctx, pod, grace)
}

// createReplicaPod creates one replica's pod as Launch would.
func (b *Backend) createReplicaPod(ctx context.Context, g backend.GangSpec, r backend.ReplicaSpec, svc *corev1.Service, p elasticPlan) error {
	fwEnv, err := frameworks.EnvFor(g, r, p.ep)
	if err != nil {
		return backend.InvalidSpec(err)
	}
	s3Env, err := b.ensureS3Secret(ctx, p.ns, g.Workspace)
	if err != nil {
		return err
	}
	pod := b.podFor(g, r, svc, fwEnv, p.ports, p.mounts)
	withS3Env(&pod.Spec.Containers[0], s3Env, r.Env)
	b.addBatchScheduling(g, pod)
	return b.createPod(ctx, pod)
}
