package kube

// Batch schedulers: per pool, a gang's pods can be handed to the cluster's own gang
// scheduler instead of being placed by the default scheduler under OpenDLC's own
// placement timeout.
//
//	coscheduling  scheduler-plugins' Coscheduling plugin: a PodGroup
//	              (scheduling.x-k8s.io/v1alpha1) named after the gang's Service, the
//	              pods labelled scheduling.x-k8s.io/pod-group and given the second
//	              scheduler's schedulerName
//	volcano       Volcano: a PodGroup (scheduling.volcano.sh/v1beta1) in a queue, the
//	              pods annotated scheduling.k8s.io/group-name, schedulerName volcano
//	kueue         Kueue's plain-pod integration: no object of ours; the pods carry the
//	              queue-name and pod-group-name labels and the pod-group-total-count
//	              annotation, and Kueue's webhook gates them until the group is admitted
//
// The group objects are unstructured (client-go's dynamic client), so no scheduler's
// Go API module is needed; the Service owns them like the gang's other objects, and
// Stop and Cleanup delete them.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// GangScheduler is who places a pool's gangs.
type GangScheduler string

// Gang schedulers.
const (
	// GangSchedulerOpenDLC leaves placement to the pods' scheduler (the cluster's
	// default) under OpenDLC's own placement timeout. The default.
	GangSchedulerOpenDLC GangScheduler = ""
	// GangSchedulerCoscheduling hands gangs to the Coscheduling plugin of
	// sigs.k8s.io/scheduler-plugins, usually run as a second scheduler.
	GangSchedulerCoscheduling GangScheduler = "coscheduling"
	// GangSchedulerVolcano hands gangs to Volcano's scheduler.
	GangSchedulerVolcano GangScheduler = "volcano"
	// GangSchedulerKueue hands gangs to Kueue's plain-pod integration.
	GangSchedulerKueue GangScheduler = "kueue"
)

// GangSchedulers are the values ParseGangScheduler accepts, besides "" and "opendlc".
var GangSchedulers = []GangScheduler{GangSchedulerCoscheduling, GangSchedulerVolcano, GangSchedulerKueue}

// ParseGangScheduler parses "opendlc" (or ""), "coscheduling", "volcano" and "kueue".
func ParseGangScheduler(s string) (GangScheduler, error) {
	switch s {
	case "", "opendlc":
		return GangSchedulerOpenDLC, nil
	case string(GangSchedulerCoscheduling), string(GangSchedulerVolcano), string(GangSchedulerKueue):
		return GangScheduler(s), nil
	}
	return "", fmt.Errorf("kube: gang scheduler %q: want opendlc, coscheduling, volcano or kueue", s)
}

// Default scheduler names of the pods of each gang scheduler.
const (
	// DefaultCoschedulingSchedulerName is the schedulerName of scheduler-plugins
	// installed as a second scheduler (its as-a-second-scheduler chart).
	DefaultCoschedulingSchedulerName = "scheduler-plugins-scheduler"
	// VolcanoSchedulerName is Volcano's scheduler.
	VolcanoSchedulerName = "volcano"
	// DefaultVolcanoQueue is the queue Volcano creates at installation.
	DefaultVolcanoQueue = "default"
)

// Keys and objects of the batch schedulers, as their sources define them.
const (
	// LabelCoschedulingPodGroup names a pod's PodGroup for scheduler-plugins.
	LabelCoschedulingPodGroup = "scheduling.x-k8s.io/pod-group"
	// AnnotationVolcanoGroupName names a pod's PodGroup for Volcano.
	AnnotationVolcanoGroupName = "scheduling.k8s.io/group-name"
	// AnnotationVolcanoQueueName names a pod's queue for Volcano (informational:
	// Volcano takes the queue from the PodGroup).
	AnnotationVolcanoQueueName = "scheduling.volcano.sh/queue-name"
	// LabelKueueQueueName names a pod's LocalQueue for Kueue.
	LabelKueueQueueName = "kueue.x-k8s.io/queue-name"
	// LabelKueuePodGroupName names a pod's group for Kueue.
	LabelKueuePodGroupName = "kueue.x-k8s.io/pod-group-name"
	// AnnotationKueuePodGroupTotalCount is the number of pods of a Kueue pod group.
	AnnotationKueuePodGroupTotalCount = "kueue.x-k8s.io/pod-group-total-count"
	// AnnotationKueueRetriableInGroup "false" tells Kueue the group ends when one
	// of its pods fails: OpenDLC never replaces a pod within an attempt.
	AnnotationKueueRetriableInGroup = "kueue.x-k8s.io/retriable-in-group"
)

// The PodGroup resources.
var (
	CoschedulingPodGroups = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	VolcanoPodGroups      = schema.GroupVersionResource{Group: "scheduling.volcano.sh", Version: "v1beta1", Resource: "podgroups"}
)

// BatchScheduling is how a pool's gangs reach the cluster's batch scheduler.
type BatchScheduling struct {
	// Scheduler is who places the gangs. Default GangSchedulerOpenDLC.
	Scheduler GangScheduler
	// SchedulerName is the pods' schedulerName. Default:
	// DefaultCoschedulingSchedulerName for coscheduling, VolcanoSchedulerName for
	// volcano, the cluster's default scheduler for kueue (Kueue admits, the
	// scheduler places).
	SchedulerName string
	// Queue is Volcano's queue (default DefaultVolcanoQueue) or Kueue's LocalQueue
	// in the gang's namespace (required).
	Queue string
}

// withDefaults fills in the defaults and checks the settings.
func (s BatchScheduling) withDefaults() (BatchScheduling, error) {
	switch s.Scheduler {
	case GangSchedulerOpenDLC:
		if s.SchedulerName != "" || s.Queue != "" {
			return s, errors.New("a scheduler name or queue needs a gang scheduler (coscheduling, volcano or kueue)")
		}
		return s, nil
	case GangSchedulerCoscheduling:
		if s.Queue != "" {
			return s, errors.New("coscheduling has no queues")
		}
		if s.SchedulerName == "" {
			s.SchedulerName = DefaultCoschedulingSchedulerName
		}
	case GangSchedulerVolcano:
		if s.SchedulerName == "" {
			s.SchedulerName = VolcanoSchedulerName
		}
		if s.Queue == "" {
			s.Queue = DefaultVolcanoQueue
		}
	case GangSchedulerKueue:
		if s.Queue == "" {
			return s, errors.New("kueue needs a queue: the LocalQueue in each workspace namespace")
		}
		if errs := validation.IsValidLabelValue(s.Queue); len(errs) > 0 {
			return s, fmt.Errorf("queue %q is not a valid label value: %v", s.Queue, errs)
		}
	default:
		return s, fmt.Errorf("unknown gang scheduler %q", s.Scheduler)
	}
	if s.SchedulerName != "" && len(validation.IsDNS1123Subdomain(s.SchedulerName)) > 0 {
		return s, fmt.Errorf("scheduler name %q is not a valid name", s.SchedulerName)
	}
	if s.Queue != "" && len(validation.IsDNS1123Subdomain(s.Queue)) > 0 {
		return s, fmt.Errorf("queue %q is not a valid object name", s.Queue)
	}
	return s, nil
}

// WithBatchScheduling hands the gangs of pool to the cluster's batch scheduler.
// Coscheduling and Volcano need WithDynamicClient (their PodGroups are custom
// resources). Default: every pool is placed by OpenDLC.
func WithBatchScheduling(pool schemas.Pool, s BatchScheduling) Option {
	return func(b *Backend) error {
		s, err := s.withDefaults()
		if err != nil {
			return fmt.Errorf("kube: pool %s: %w", pool, err)
		}
		if b.batch == nil {
			b.batch = map[schemas.Pool]BatchScheduling{}
		}
		b.batch[pool] = s
		return nil
	}
}

// WorkerBatchClusterRole is the cluster role of deploy/rbac-batchsched.yaml.
const WorkerBatchClusterRole = "opendlc-worker-batchsched"

// BatchSchedulerPolicyRules are the permissions a worker needs beyond PolicyRules when
// a pool hands gangs to coscheduling or Volcano: the rules of
// deploy/rbac-batchsched.yaml's ClusterRole (a test keeps the two equal). PodGroups are
// created and deleted, never read: an existing one is the gang's.
func BatchSchedulerPolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{
		APIGroups: []string{CoschedulingPodGroups.Group, VolcanoPodGroups.Group},
		Resources: []string{"podgroups"},
		Verbs:     []string{"create", "delete"},
	}}
}

// WithDynamicClient sets the client of custom resources (the batch schedulers'
// PodGroups). Default: none; New refuses a pool whose gang scheduler needs one.
func WithDynamicClient(c dynamic.Interface) Option {
	return func(b *Backend) error {
		b.dynamic = c
		return nil
	}
}

// checkBatchScheduling refuses, at New, a configuration that could not create its
// PodGroups.
func (b *Backend) checkBatchScheduling() error {
	for pool, s := range b.batch {
		if groupResource(s.Scheduler) != nil && b.dynamic == nil {
			return fmt.Errorf("kube: pool %s hands gangs to %s, whose PodGroups need a dynamic client (WithDynamicClient)", pool, s.Scheduler)
		}
	}
	return nil
}

// batchFor is the batch scheduling of pool's gangs.
func (b *Backend) batchFor(pool schemas.Pool) BatchScheduling {
	return b.batch[poolName(pool)]
}

// groupResource is the PodGroup resource of a gang scheduler; nil for none.
func groupResource(s GangScheduler) *schema.GroupVersionResource {
	switch s {
	case GangSchedulerCoscheduling:
		return &CoschedulingPodGroups
	case GangSchedulerVolcano:
		return &VolcanoPodGroups
	}
	return nil
}

// groupName is the name of a gang's PodGroup (or Kueue pod group): its Service's, a
// DNS label unique per attempt.
func groupName(ref backend.GangRef) string { return serviceName(ref) }

// addBatchScheduling labels, annotates and names the scheduler of a pod of g as its
// pool's batch scheduler wants. The job's own annotations and labels lose to these.
func (b *Backend) addBatchScheduling(g backend.GangSpec, pod *corev1.Pod) {
	s := b.batchFor(g.Pool)
	if s.Scheduler == GangSchedulerOpenDLC {
		return
	}
	name := groupName(g.GangRef)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Spec.SchedulerName = s.SchedulerName
	switch s.Scheduler {
	case GangSchedulerCoscheduling:
		pod.Labels[LabelCoschedulingPodGroup] = name
	case GangSchedulerVolcano:
		pod.Annotations[AnnotationVolcanoGroupName] = name
		pod.Annotations[AnnotationVolcanoQueueName] = s.Queue
	case GangSchedulerKueue:
		pod.Labels[LabelKueueQueueName] = s.Queue
		pod.Labels[LabelKueuePodGroupName] = name
		pod.Annotations[AnnotationKueuePodGroupTotalCount] = strconv.Itoa(len(g.Replicas))
		pod.Annotations[AnnotationKueueRetriableInGroup] = "false"
	}
}

// podGroupFor is the PodGroup of g under s, owned by svc; nil when s has none.
func podGroupFor(g backend.GangSpec, s BatchScheduling, svc *corev1.Service) *unstructured.Unstructured {
	gvr := groupResource(s.Scheduler)
	if gvr == nil {
		return nil
	}
	spec := map[string]any{"minMember": int64(len(g.Replicas))}
	if least := minResources(g); len(least) > 0 {
		spec["minResources"] = least
	}
	switch s.Scheduler {
	case GangSchedulerCoscheduling:
		if t := g.PlacementTimeout; t > 0 {
			// The plugin lets a partly placed gang wait this long at Permit, then
			// releases every pod it holds.
			spec["scheduleTimeoutSeconds"] = int64(max(time.Second, t.Round(time.Second)) / time.Second)
		}
	case GangSchedulerVolcano:
		spec["queue"] = s.Queue
	}
	owners := make([]any, 0, 1)
	for _, o := range ownedBy(svc) {
		owners = append(owners, map[string]any{
			"apiVersion": o.APIVersion, "kind": o.Kind, "name": o.Name, "uid": string(o.UID),
			"controller": *o.Controller, "blockOwnerDeletion": *o.BlockOwnerDeletion,
		})
	}
	labels := map[string]any{}
	for k, v := range gangLabels(g) {
		labels[k] = v
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(),
		"kind":       "PodGroup",
		"metadata": map[string]any{
			"name":            groupName(g.GangRef),
			"namespace":       svc.Namespace,
			"labels":          labels,
			"ownerReferences": owners,
		},
		"spec": spec,
	}}
}

// minResources is what the whole gang requests, as a PodGroup's minResources: the
// schedulers refuse a gang that the cluster cannot hold at all before placing any
// pod of it.
func minResources(g backend.GangSpec) map[string]any {
	sum := corev1.ResourceList{}
	for _, r := range g.Replicas {
		for name, q := range resources(r.Resources).Requests {
			cur := sum[name]
			cur.Add(q)
			sum[name] = cur
		}
	}
	out := make(map[string]any, len(sum))
	for name, q := range sum {
		out[string(name)] = q.String()
	}
	return out
}

// ensureGangGroup creates the PodGroup of g where its pool's batch scheduler wants
// one, before any pod: a pod whose group does not exist yet is placed alone by
// Volcano and skipped by Coscheduling's quorum. An existing group of the same name is
// this gang's (its name is the Service's, which ensureService checked).
func (b *Backend) ensureGangGroup(ctx context.Context, g backend.GangSpec, svc *corev1.Service) error {
	s := b.batchFor(g.Pool)
	pg := podGroupFor(g, s, svc)
	if pg == nil {
		return nil
	}
	gvr := *groupResource(s.Scheduler)
	_, err := b.dynamic.Resource(gvr).Namespace(svc.Namespace).Create(ctx, pg, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && !namespaceGone(err):
		// The CRD is not installed: the pool is configured for a scheduler the
		// cluster does not run. Retrying cannot help.
		return backend.InvalidSpec(fmt.Errorf("kube: pool %s hands gangs to %s, but the cluster does not serve %s (is %s installed?): %w",
			poolName(g.Pool), s.Scheduler, gvr.GroupResource(), s.Scheduler, err))
	case apierrors.IsInvalid(err):
		return backend.InvalidSpec(fmt.Errorf("kube: create %s %s/%s: %w", gvr.GroupResource(), svc.Namespace, groupName(g.GangRef), err))
	}
	return fmt.Errorf("kube: create %s %s/%s: %w", gvr.GroupResource(), svc.Namespace, groupName(g.GangRef), err)
}

// namespaceGone reports whether a NotFound error is about the namespace (deleted
// under us: a retry recreates it) rather than the resource.
func namespaceGone(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) || se.Status().Details == nil {
		return false
	}
	return se.Status().Details.Kind == "namespaces"
}

// poolName is p, or the quota pool for a gang that names none.
func poolName(p schemas.Pool) schemas.Pool {
	if p == "" {
		return schemas.PoolQuota
	}
	return p
}

// deleteGangGroups deletes the gang's PodGroups of every batch scheduler some pool
// uses (Stop and Cleanup know the gang, not its pool); missing ones count as deleted.
func (b *Backend) deleteGangGroups(ctx context.Context, ns string, ref backend.GangRef) error {
	if b.dynamic == nil {
		return nil
	}
	seen := map[schema.GroupVersionResource]bool{}
	for _, pool := range sortedNames(poolKeys(b.batch)) {
		gvr := groupResource(b.batch[schemas.Pool(pool)].Scheduler)
		if gvr == nil || seen[*gvr] {
			continue
		}
		seen[*gvr] = true
		err := b.dynamic.Resource(*gvr).Namespace(ns).Delete(ctx, groupName(ref), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
			return fmt.Errorf("kube: delete %s %s/%s: %w", gvr.GroupResource(), ns, groupName(ref), err)
		}
	}
	return nil
}

func poolKeys(m map[schemas.Pool]BatchScheduling) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range maps.Keys(m) {
		out[string(k)] = true
	}
	return out
}
