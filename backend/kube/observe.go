package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// Messages of replicas whose pod is missing.
const (
	// MessageNotCreated: Launch has not created the pod yet.
	MessageNotCreated = "pod not created yet"
	// MessagePodDeleted: the pod was deleted by someone other than OpenDLC (a person,
	// the node lifecycle controller) after Launch created it.
	MessagePodDeleted = "pod deleted"
	// MessageStopped: the replica was stopped; its pod is gone or going.
	MessageStopped = "stopped"
	// MessageStoppedBeforeStart: the gang was stopped before the replica's pod existed.
	MessageStoppedBeforeStart = "stopped before it started"
)

// Waiting reasons that never resolve on their own: the replica is reported Failed at
// once rather than Pending until the workflow's patience runs out. A failed image pull
// (ErrImagePull, ImagePullBackOff) may resolve: applyPullGrace decides it.
var permanentWaiting = map[string]schemas.FailureClass{
	"InvalidImageName":           schemas.FailureImagePull,
	"ErrImageNeverPull":          schemas.FailureImagePull,
	"SignatureValidationFailed":  schemas.FailureImagePull,
	"CreateContainerConfigError": schemas.FailureConfig,
	"CreateContainerError":       schemas.FailureConfig,
}

// disruptionClass maps a DisruptionTarget condition's reason to a failure class.
var disruptionClass = map[string]schemas.FailureClass{
	"PreemptionByScheduler":  schemas.FailurePreempted,
	"EvictionByEvictionAPI":  schemas.FailureEvicted,
	"TerminationByKubelet":   schemas.FailureEvicted,
	"DeletionByTaintManager": schemas.FailureNodeLost,
	"DeletionByPodGC":        schemas.FailureNodeLost,
}

// failedClass classifies a pod in phase Failed.
func failedClass(pod *corev1.Pod, cs *corev1.ContainerStatus) schemas.FailureClass {
	switch pod.Status.Reason {
	case "Evicted":
		return schemas.FailureEvicted
	case "NodeLost", "Shutdown", "Terminated", "NodeShutdown":
		return schemas.FailureNodeLost
	}
	if c := condition(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		if cl, ok := disruptionClass[c.Reason]; ok {
			return cl
		}
	}
	if cs != nil && cs.State.Terminated != nil {
		t := cs.State.Terminated
		switch {
		case t.Reason == "OOMKilled":
			return schemas.FailureOOMKilled
		case t.ExitCode > 128:
			return schemas.FailureSignal
		}
	}
	return schemas.FailureError
}

// explainDeleted classifies a replica whose pod is gone by the pod's last state, when
// the cache saw it: evicted, preempted or deleted with its node.
func explainDeleted(s *schemas.ReplicaStatus, last *corev1.Pod) {
	if last == nil {
		return
	}
	s.Node = last.Spec.NodeName
	if c := condition(last, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
		if cl, ok := disruptionClass[c.Reason]; ok {
			s.Reason = cl
		}
		s.Message += ": " + joinReason(c.Reason, c.Message)
	}
}

// gangRecord is what the Service says about its gang.
type gangRecord struct {
	replicas []replicaRef
	launched bool
	stopped  bool
}

// Observe reports every replica of the gang in GangSpec order, from the informers'
// cache where it is complete and from the API server otherwise. The replica list comes
// from the gang's Service; if the Service is gone but pods remain, from the pods' labels
// (roles by name, then indexes). A gang with neither is ErrGangNotFound.
func (b *Backend) Observe(ctx context.Context, ref backend.GangRef) (backend.GangStatus, error) {
	ns := b.namespaceOf(ref)
	if !b.mayUse(ns) {
		return backend.GangStatus{}, fmt.Errorf("%w: %s (namespace %s is not the worker's)", backend.ErrGangNotFound, ref.ID(), ns)
	}
	rec, found, err := b.record(ctx, ns, ref)
	if err != nil {
		return backend.GangStatus{}, err
	}
	pods, err := b.cache.gangPods(ctx, ns, ref, len(rec.replicas))
	if err != nil {
		return backend.GangStatus{}, err
	}
	if !found && len(pods) == 0 {
		return backend.GangStatus{}, fmt.Errorf("%w: %s (namespace %s)", backend.ErrGangNotFound, ref.ID(), ns)
	}
	if !found {
		rec.replicas = replicasFromPods(pods)
		rec.launched = true // pods exist without their Service: whatever is missing is gone
	}
	byName := make(map[string]*corev1.Pod, len(pods))
	for _, p := range pods {
		byName[p.Name] = p
	}
	out := backend.GangStatus{Replicas: make([]schemas.ReplicaStatus, 0, len(rec.replicas))}
	for _, r := range rec.replicas {
		st := replicaStatus(r, byName[r.Name], rec)
		b.applyPullGrace(&st, byName[r.Name])
		if st.Reason == schemas.FailurePodDeleted && byName[r.Name] == nil {
			explainDeleted(&st, b.cache.deleted(ns, r.Name))
		}
		out.Replicas = append(out.Replicas, st)
	}
	b.markLost(out.Replicas, rec.stopped)
	return out, nil
}

// record reads the gang's Service. found is false when it does not exist.
func (b *Backend) record(ctx context.Context, ns string, ref backend.GangRef) (rec gangRecord, found bool, err error) {
	rec.stopped = b.stoppedHere(ref.ID())
	svc, err := b.cache.service(ctx, ns, serviceName(ref))
	if err != nil || svc == nil {
		return rec, false, err
	}
	if svc.Labels[LabelGang] != gangValue(ref) {
		return rec, false, nil // another gang's Service under a colliding name
	}
	if err := json.Unmarshal([]byte(svc.Annotations[AnnotationReplicas]), &rec.replicas); err != nil {
		return rec, false, fmt.Errorf("kube: service %s/%s: bad %s annotation: %w", ns, svc.Name, AnnotationReplicas, err)
	}
	rec.launched = svc.Annotations[AnnotationLaunched] != ""
	rec.stopped = rec.stopped || svc.Annotations[AnnotationStopped] != ""
	return rec, true, nil
}

// replicasFromPods derives the replica list from the pods' labels, ordered as BuildGang
// orders a gang: roles by name, then indexes.
func replicasFromPods(pods []*corev1.Pod) []replicaRef {
	out := make([]replicaRef, 0, len(pods))
	for _, p := range pods {
		i, _ := strconv.Atoi(p.Labels[LabelReplicaIndex])
		out = append(out, replicaRef{Name: p.Name, Role: p.Labels[LabelRole], Index: i})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role < out[j].Role
		}
		return out[i].Index < out[j].Index
	})
	return out
}

// replicaStatus maps a replica's pod (nil if missing) to its status.
//
// In a stopped gang, a replica is Stopped unless its pod had finished on its own
// (Stop leaves finished pods alone, so their phase and exit code stay visible until
// Cleanup). Outside a stopped gang, a pod being deleted will not finish: it is Failed,
// with the reason Kubernetes gives (eviction, node failure).
func replicaStatus(r replicaRef, pod *corev1.Pod, g gangRecord) schemas.ReplicaStatus {
	s := schemas.ReplicaStatus{Name: r.Name, Role: r.Role, Index: r.Index, Phase: schemas.ReplicaPending}
	if pod == nil {
		switch {
		case g.stopped && g.launched:
			s.Phase, s.Message = schemas.ReplicaStopped, MessageStopped
		case g.stopped:
			s.Phase, s.Message = schemas.ReplicaStopped, MessageStoppedBeforeStart
		case g.launched:
			s.Phase, s.Message, s.Reason = schemas.ReplicaFailed, MessagePodDeleted, schemas.FailurePodDeleted
		default:
			s.Message = MessageNotCreated
		}
		return s
	}
	s.Node = pod.Spec.NodeName
	cs := mainStatus(pod)
	s.StartTime = startTime(pod, cs)
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	deleting := pod.DeletionTimestamp != nil

	switch {
	case g.stopped && (deleting || !finished):
		s.Phase, s.Message = schemas.ReplicaStopped, MessageStopped
		if cs != nil && cs.State.Terminated != nil {
			s.FinishTime = timePtr(cs.State.Terminated.FinishedAt)
		}
	case pod.Status.Phase == corev1.PodSucceeded:
		s.Phase = schemas.ReplicaSucceeded
		s.ExitCode = ptr[int32](0)
		if cs != nil && cs.State.Terminated != nil {
			s.ExitCode = new(cs.State.Terminated.ExitCode)
			s.FinishTime = timePtr(cs.State.Terminated.FinishedAt)
		}
	case pod.Status.Phase == corev1.PodFailed:
		s.Phase = schemas.ReplicaFailed
		s.Reason = failedClass(pod, cs)
		s.Message = joinReason(pod.Status.Reason, pod.Status.Message)
		if cs != nil && cs.State.Terminated != nil {
			t := cs.State.Terminated
			s.ExitCode = new(t.ExitCode)
			s.FinishTime = timePtr(t.FinishedAt)
			if s.Message == "" {
				s.Message = joinReason(t.Reason, t.Message)
			}
		}
		if s.FinishTime == nil {
			s.FinishTime = conditionTime(pod, corev1.PodReady)
		}
	case deleting:
		s.Phase = schemas.ReplicaFailed
		s.Message = "pod is being deleted"
		s.Reason = schemas.FailurePodDeleted
		if c := condition(pod, corev1.DisruptionTarget); c != nil && c.Status == corev1.ConditionTrue {
			s.Message += ": " + joinReason(c.Reason, c.Message)
			if cl, ok := disruptionClass[c.Reason]; ok {
				s.Reason = cl
			}
		}
	case pod.Status.Phase == corev1.PodRunning:
		s.Phase = schemas.ReplicaRunning
	case pod.Status.Phase == corev1.PodPending || pod.Status.Phase == "": // "": not defaulted yet
		s.Message = pendingMessage(pod, cs)
		if cs != nil && cs.State.Waiting != nil {
			if cl, ok := permanentWaiting[cs.State.Waiting.Reason]; ok {
				s.Phase, s.Reason = schemas.ReplicaFailed, cl
			}
		}
	default: // Unknown: the node stopped reporting; the container may still run.
		s.Message = joinReason("pod phase "+string(pod.Status.Phase), pod.Status.Message)
		if s.StartTime != nil {
			s.Phase = schemas.ReplicaRunning
		}
	}
	return s
}

// mainStatus is the status of the pod's container, nil before the kubelet reports one.
func mainStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// startTime is when the container started, else when the kubelet took the pod.
func startTime(pod *corev1.Pod, cs *corev1.ContainerStatus) *time.Time {
	if cs != nil {
		switch {
		case cs.State.Running != nil:
			return timePtr(cs.State.Running.StartedAt)
		case cs.State.Terminated != nil && !cs.State.Terminated.StartedAt.IsZero():
			return timePtr(cs.State.Terminated.StartedAt)
		}
	}
	if pod.Status.StartTime != nil {
		return timePtr(*pod.Status.StartTime)
	}
	return nil
}

// pendingMessage says why a pod is not running yet: the container's waiting reason
// (ContainerCreating, ErrImagePull, ImagePullBackOff...) or the scheduler's
// (Unschedulable, with which resources were short).
func pendingMessage(pod *corev1.Pod, cs *corev1.ContainerStatus) string {
	if cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
		return joinReason(cs.State.Waiting.Reason, cs.State.Waiting.Message)
	}
	if c := condition(pod, corev1.PodScheduled); c != nil && c.Status == corev1.ConditionFalse {
		return joinReason(c.Reason, c.Message)
	}
	if pod.Spec.NodeName == "" {
		return "waiting to be scheduled"
	}
	return ""
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func conditionTime(pod *corev1.Pod, t corev1.PodConditionType) *time.Time {
	if c := condition(pod, t); c != nil && !c.LastTransitionTime.IsZero() {
		return timePtr(c.LastTransitionTime)
	}
	return nil
}

// joinReason is "reason: message", or whichever is set.
func joinReason(reason, msg string) string {
	switch {
	case reason == "":
		return msg
	case msg == "":
		return reason
	}
	return reason + ": " + msg
}

func timePtr(t metav1.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
