package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// Node health checks and quarantine.
//
// A pre-flight check (CheckNodes) looks at every node a job's pods could land on: the
// nodes some role's pod, built as Launch builds it, is eligible for (eligibility.go:
// its node selector and the pool's, its required node affinity, which keeps it off
// the excluded nodes, and its tolerations and the pool's), and which have GPUs, for a
// role that needs them. A node is healthy when
// its Ready condition is True, it is schedulable, it allocates every GPU it has
// (allocatable nvidia.com/gpu equal to capacity: fewer means GPUs were lost), and a
// check pod run on it succeeds within the timeout.
//
// The check pod is bound to its node by spec.nodeName (no scheduler in the way), and
// tolerates every taint: it judges the node, quarantined or not. It requests no
// resources, so it is admitted on a node whose CPUs and GPUs are all allocated to
// training pods; it sees the node's GPUs through NVIDIA_VISIBLE_DEVICES=all, which the
// NVIDIA container runtime honours, without allocating any. Its default command checks
// that nvidia-smi lists as many GPUs as the node has, and that the root file system
// answers (see DefaultHealthProbeCommand); WithHealthProbe replaces both.
//
// An unhealthy node is quarantined: tainted opendlc.io/quarantined=true:NoSchedule,
// labelled opendlc.io/quarantined=true, and annotated with why, when and how many
// times its checks failed. Not quarantined: cordoned nodes (an administrator's
// decision), nodes whose check pod could not even start (an image or configuration
// problem of the probe, more likely than of the node), and every node of a check in
// which more than half of the checked nodes failed at once (more likely a broken probe
// or a zone outage than that many bad nodes; the nodes are still reported unhealthy).
//
// RecheckQuarantined runs the same checks on quarantined nodes whose backoff has
// passed (base × 2^(count-1), capped; WithQuarantineBackoff), releases those found
// healthy (taint, label and annotations removed) and lengthens the others' backoff.

// Labels, annotations and the taint of node health checks and quarantine.
const (
	// TaintQuarantined is the key of the taint (value "true", effect NoSchedule) and
	// the label (value "true") that quarantine a node.
	TaintQuarantined = "opendlc.io/quarantined"
	// LabelQuarantined is the label that marks a quarantined node, for selectors
	// (kubectl get nodes -l opendlc.io/quarantined=true).
	LabelQuarantined = TaintQuarantined
	// AnnotationQuarantineReason says why the node was quarantined ("Reason: message").
	AnnotationQuarantineReason = "opendlc.io/quarantine-reason"
	// AnnotationQuarantinedAt is when the quarantine began (RFC 3339).
	AnnotationQuarantinedAt = "opendlc.io/quarantined-at"
	// AnnotationQuarantineCount counts the failed checks since the quarantine began:
	// 1 at first, one more per failed re-check. The re-check backoff grows with it.
	AnnotationQuarantineCount = "opendlc.io/quarantine-count"
	// AnnotationQuarantineCheckedAt is when the node was last checked (RFC 3339); the
	// next re-check is due a backoff after it.
	AnnotationQuarantineCheckedAt = "opendlc.io/quarantine-checked-at"
	// AnnotationQuarantinedBy names the check that quarantined the node (a gang ID), so
	// a retried check knows the quarantine for its own.
	AnnotationQuarantinedBy = "opendlc.io/quarantined-by"

	// LabelHealthCheck marks check pods: "job" for a job's pre-flight check,
	// "recheck" for a quarantined node's re-check.
	LabelHealthCheck = "opendlc.io/health-check"
	// LabelCheckGang is, on a job's check pod, the gang (GangRef.ID) the check is for.
	LabelCheckGang = "opendlc.io/check-gang"
	// LabelNode is the checked node's name on its check pod (shortened as label
	// values are); AnnotationNode holds it in full.
	LabelNode      = "opendlc.io/node"
	AnnotationNode = "opendlc.io/node"
)

// Defaults of the health options.
const (
	// DefaultHealthProbeImage is the check pods' image: CUDA's base image, into which
	// the NVIDIA container runtime mounts nvidia-smi.
	DefaultHealthProbeImage = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
	// DefaultQuarantineBackoff and DefaultMaxQuarantineBackoff bound how long a
	// quarantined node waits for its next re-check: 1m after the first failure, then
	// 2m, 4m... up to 1h.
	DefaultQuarantineBackoff    = time.Minute
	DefaultMaxQuarantineBackoff = time.Hour
)

// DefaultHealthProbeCommand is the check pods' command. The pod's environment holds
// DLC_NODE (the node's name) and DLC_NODE_GPUS (its nvidia.com/gpu capacity): on a GPU
// node, nvidia-smi must list at least that many GPUs; on every node, the root file
// system must answer.
var DefaultHealthProbeCommand = []string{"sh", "-c", `set -e
if [ "${DLC_NODE_GPUS:-0}" -gt 0 ]; then
  n=$(nvidia-smi -L | grep -c '^GPU ' || true)
  if [ "$n" -lt "$DLC_NODE_GPUS" ]; then
    echo "nvidia-smi lists $n of the node's $DLC_NODE_GPUS GPUs"
    exit 1
  fi
fi
df -h /
`}

// healthConfig holds the health options; its zero value means the defaults.
type healthConfig struct {
	image       string
	command     []string
	annotations map[string]string
	namespace   string
	backoff     time.Duration
	maxBackoff  time.Duration
	backoffSet  bool
	now         func() time.Time // tests pin the quarantine clock; default: the Backend's clock
}

// WithHealthProbe sets the check pods' image and command (the full argv). The command
// must exit 0 on a healthy node; DLC_NODE and DLC_NODE_GPUS are in its environment.
// Default: DefaultHealthProbeImage and DefaultHealthProbeCommand.
func WithHealthProbe(image string, command ...string) Option {
	return func(b *Backend) error {
		if image == "" {
			return errors.New("kube: health probe: empty image")
		}
		if len(command) == 0 || command[0] == "" {
			return errors.New("kube: health probe: empty command")
		}
		b.health.image, b.health.command = image, slices.Clone(command)
		return nil
	}
}

// WithHealthProbeAnnotations adds annotations to every check pod: for a service mesh
// to leave it alone (a sidecar would keep it from finishing), or for a simulator (kwok
// completes a pod annotated kwok.opendlc.io/complete-after). Check pods do not get
// WithPodAnnotations' annotations, which are meant for training pods. Default: none.
// Repeated options accumulate.
func WithHealthProbeAnnotations(a map[string]string) Option {
	return func(b *Backend) error {
		if b.health.annotations == nil {
			b.health.annotations = map[string]string{}
		}
		maps.Copy(b.health.annotations, a)
		return nil
	}
}

// WithHealthNamespace sets the namespace of the re-check pods of quarantined nodes
// (a job's pre-flight check pods run in the job's namespace). Default: WorkerNamespace.
func WithHealthNamespace(ns string) Option {
	return func(b *Backend) error {
		if ns == "" {
			return errors.New("kube: empty health namespace")
		}
		b.health.namespace = ns
		return nil
	}
}

// WithQuarantineBackoff sets how long a quarantined node waits between re-checks:
// base after its first failed check, doubling with each failed re-check, at most limit.
// A zero base re-checks at every round. Default: DefaultQuarantineBackoff and
// DefaultMaxQuarantineBackoff.
func WithQuarantineBackoff(base, limit time.Duration) Option {
	return func(b *Backend) error {
		if base < 0 || limit < base {
			return fmt.Errorf("kube: quarantine backoff %v..%v: want 0 <= base <= max", base, limit)
		}
		b.health.backoff, b.health.maxBackoff, b.health.backoffSet = base, limit, true
		return nil
	}
}

var _ backend.NodeChecker = (*Backend)(nil)

func (b *Backend) healthNow() time.Time {
	if b.health.now != nil {
		return b.health.now()
	}
	return b.clock.Now()
}

func (b *Backend) healthNamespace() string {
	if b.health.namespace != "" {
		return b.health.namespace
	}
	return WorkerNamespace
}

// quarantineBackoff is how long a node whose checks failed count times waits for its
// next re-check.
func (b *Backend) quarantineBackoff(count int) time.Duration {
	base, limit := DefaultQuarantineBackoff, DefaultMaxQuarantineBackoff
	if b.health.backoffSet {
		base, limit = b.health.backoff, b.health.maxBackoff
	}
	if count < 1 {
		count = 1
	}
	d := float64(base) * math.Pow(2, float64(count-1))
	if d >= float64(limit) {
		return limit
	}
	return time.Duration(d)
}

// CheckNodes checks every candidate node of the job (see the package comment on
// health) and quarantines the unhealthy ones. Nodes quarantined earlier are reported
// unhealthy (reason Quarantined) without being probed.
func (b *Backend) CheckNodes(ctx context.Context, in backend.CheckNodesInput) (backend.CheckNodesResult, error) {
	if b.healthOff {
		return backend.CheckNodesResult{}, errHealthChecksOff
	}
	if in.Timeout <= 0 {
		in.Timeout = backend.DefaultHealthCheckTimeout
	}
	pool := in.Pool
	if pool == "" {
		pool = in.Job.Spec.Resources.Pool
	}
	checkID := in.Ref.ID()
	nodes, err := b.listNodes(ctx)
	if err != nil {
		return backend.CheckNodesResult{}, err
	}
	candidates, err := b.candidates(in, pool, nodes)
	if err != nil {
		return backend.CheckNodesResult{}, err
	}
	res := backend.CheckNodesResult{Nodes: []backend.NodeHealth{}}
	verdicts := map[string]backend.NodeHealth{}
	var toProbe []*corev1.Node
	now := b.healthNow().UTC()
	for _, n := range nodes {
		if !candidates[n.Name] {
			continue
		}
		if quarantined(n) {
			h := quarantinedHealth(n, now)
			if n.Annotations[AnnotationQuarantinedBy] == checkID {
				// Our own quarantine, from a run of this check that did not get to
				// report it: report it as this check's.
				res.Quarantined = append(res.Quarantined, n.Name)
				h.Reason, h.Message = splitReason(n.Annotations[AnnotationQuarantineReason])
			}
			verdicts[n.Name] = h
			continue
		}
		h := staticHealth(n, now)
		verdicts[n.Name] = h
		if h.Healthy {
			toProbe = append(toProbe, n)
		}
	}

	if len(toProbe) > 0 {
		ns := b.namespaceOf(in.Ref)
		if err := b.allowNamespace(ns); err != nil {
			return backend.CheckNodesResult{}, err
		}
		if err := b.ensureNamespace(ctx, ns, in.Ref.Workspace); err != nil {
			return backend.CheckNodesResult{}, err
		}
		pods := make([]*corev1.Pod, len(toProbe))
		for i, n := range toProbe {
			// Not the job's own labels: whoever counts a job's pods counts its replicas.
			pods[i] = b.checkPod(ns, jobCheckPodName(in.Ref, n.Name), n, in.Timeout, map[string]string{
				LabelHealthCheck: "job",
				LabelCheckGang:   gangValue(in.Ref),
			})
		}
		probed, err := b.probe(ctx, pods, in.Timeout)
		if err != nil {
			return backend.CheckNodesResult{}, err
		}
		for i, n := range toProbe {
			verdicts[n.Name] = withProbe(verdicts[n.Name], probed[i])
		}
	}

	// Quarantine, unless so many failed at once that the check itself is suspect.
	var bad []string
	checked := 0
	for _, n := range nodes {
		h, ok := verdicts[n.Name]
		if !ok || h.Reason == backend.ReasonQuarantined || h.Quarantined {
			continue
		}
		checked++
		if quarantinable(h) {
			bad = append(bad, n.Name)
		}
	}
	if len(bad) > max(1, checked/2) {
		for _, name := range bad {
			h := verdicts[name]
			h.Message += fmt.Sprintf(" (not quarantined: %d of %d nodes failed this check at once, which points at the check rather than the nodes)", len(bad), checked)
			verdicts[name] = h
		}
		b.logger.Warn("kube: too many nodes failed a health check at once to quarantine them", "check", checkID, "failed", len(bad), "checked", checked)
		bad = nil
	}
	for _, name := range bad {
		h, mine, err := b.quarantine(ctx, name, verdicts[name], checkID)
		if err != nil {
			return backend.CheckNodesResult{}, err
		}
		verdicts[name] = h
		if mine {
			res.Quarantined = append(res.Quarantined, name)
		}
	}

	for _, n := range nodes { // listNodes sorts
		if h, ok := verdicts[n.Name]; ok {
			res.Nodes = append(res.Nodes, h)
		}
	}
	sort.Strings(res.Quarantined)
	res.Quarantined = slices.Compact(res.Quarantined)
	return res, nil
}

// RecheckQuarantined re-checks the quarantined nodes whose backoff has passed,
// releases the healthy ones and records another failure on the others. It also
// deletes check pods left behind by checks that never finished (a worker that died
// mid-check and whose activity was not retried).
func (b *Backend) RecheckQuarantined(ctx context.Context, probeTimeout time.Duration) ([]backend.NodeHealth, error) {
	if b.healthOff {
		return []backend.NodeHealth{}, nil
	}
	if probeTimeout <= 0 {
		probeTimeout = backend.DefaultProbeTimeout
	}
	if err := b.sweepCheckPods(ctx); err != nil {
		b.logger.Warn("kube: could not sweep old check pods", "error", err)
	}
	nodes, err := b.listNodes(ctx)
	if err != nil {
		return nil, err
	}
	now := b.healthNow().UTC()
	verdicts := map[string]backend.NodeHealth{}
	var due, toProbe []*corev1.Node
	for _, n := range nodes {
		if !quarantined(n) || now.Before(b.recheckDue(n)) {
			continue
		}
		due = append(due, n)
		h := staticHealth(n, now)
		verdicts[n.Name] = h
		if h.Healthy {
			toProbe = append(toProbe, n)
		}
	}
	if len(due) == 0 {
		return []backend.NodeHealth{}, nil
	}
	if len(toProbe) > 0 {
		ns := b.healthNamespace()
		if err := b.ensureNamespace(ctx, ns, ""); err != nil {
			return nil, err
		}
		pods := make([]*corev1.Pod, len(toProbe))
		for i, n := range toProbe {
			pods[i] = b.checkPod(ns, recheckPodName(n.Name, quarantineCount(n)), n, probeTimeout,
				map[string]string{LabelHealthCheck: "recheck"})
		}
		probed, err := b.probe(ctx, pods, probeTimeout)
		if err != nil {
			return nil, err
		}
		for i, n := range toProbe {
			verdicts[n.Name] = withProbe(verdicts[n.Name], probed[i])
		}
	}
	out := make([]backend.NodeHealth, 0, len(due))
	for _, n := range due {
		h := verdicts[n.Name]
		var err error
		if h.Healthy {
			h, err = b.release(ctx, n.Name, h)
		} else {
			h, err = b.recordFailure(ctx, n.Name, h)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// listNodes lists every node, sorted by name.
func (b *Backend) listNodes(ctx context.Context) ([]*corev1.Node, error) {
	list, err := b.client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("kube: list nodes: %w", err)
	}
	out := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// candidates returns the names of the nodes some replica of the job could run on:
// for at least one role, the nodes its pod, built as Launch builds it (the pool's node
// selector and tolerations added, kept off in.Exclude by node affinity), is eligible
// for (eligibleNodes), with GPUs when the role asks for them. Taints that say a node
// is unwell (node.kubernetes.io/...) and the quarantine taint do not count: they are
// what the check reports.
func (b *Backend) candidates(in backend.CheckNodesInput, pool schemas.Pool, nodes []*corev1.Node) (map[string]bool, error) {
	g, err := backend.BuildGang(&in.Job, backend.GangParams{Ref: in.Ref, Pool: pool, ExcludeNodes: in.Exclude})
	if err != nil {
		return nil, backend.InvalidSpec(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: serviceName(in.Ref), Namespace: b.namespaceOf(in.Ref)}}
	judged := func(t *corev1.Taint) bool { return lastingTaint(t) && t.Key != TaintQuarantined }
	out := map[string]bool{}
	roles := map[string]bool{}
	for _, r := range g.Replicas {
		if roles[r.Role] {
			continue // a role's replicas differ in name and index only
		}
		roles[r.Role] = true
		p := b.podFor(g, r, svc, nil, nil, gangMounts{})
		needsGPUs := podRequests(p)[ResourceGPU]
		for _, n := range eligibleNodes(p, nodes, judged) {
			if gpus := n.Status.Capacity[ResourceGPU]; needsGPUs.Sign() > 0 && gpus.Sign() <= 0 {
				continue
			}
			out[n.Name] = true
		}
	}
	return out, nil
}

// staticHealth judges a node by what it reports: Ready, schedulable, every GPU
// allocatable.
func staticHealth(n *corev1.Node, now time.Time) backend.NodeHealth {
	h := backend.NodeHealth{Node: n.Name, Healthy: true, Reason: backend.ReasonChecksPassed, CheckedAt: now}
	fail := func(reason, msg string) {
		if h.Healthy {
			h.Healthy, h.Reason, h.Message = false, reason, msg
		}
	}

	ready := events.HealthCheck{Name: backend.CheckReady, OK: true}
	var cond *corev1.NodeCondition
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			cond = &n.Status.Conditions[i]
		}
	}
	switch {
	case cond == nil:
		ready.OK, ready.Message = false, "the node reports no Ready condition"
	case cond.Status != corev1.ConditionTrue:
		ready.OK, ready.Message = false, joinReason("Ready is "+string(cond.Status), joinReason(cond.Reason, cond.Message))
	}
	if !ready.OK {
		fail(backend.ReasonNodeNotReady, ready.Message)
	}

	gpus := events.HealthCheck{Name: backend.CheckGPUs, OK: true}
	capacity, allocatable := n.Status.Capacity[ResourceGPU], n.Status.Allocatable[ResourceGPU]
	if allocatable.Cmp(capacity) < 0 {
		gpus.OK = false
		gpus.Message = fmt.Sprintf("allocatable %s of %s %s: GPUs lost", allocatable.String(), capacity.String(), ResourceGPU)
		fail(backend.ReasonGPUsLost, gpus.Message)
	} else if !capacity.IsZero() {
		gpus.Message = fmt.Sprintf("%s of %s %s allocatable", allocatable.String(), capacity.String(), ResourceGPU)
	}

	sched := events.HealthCheck{Name: backend.CheckSchedulable, OK: !n.Spec.Unschedulable}
	if n.Spec.Unschedulable {
		sched.Message = "the node is cordoned"
		fail(backend.ReasonCordoned, "the node is cordoned (spec.unschedulable)")
	}
	h.Checks = []events.HealthCheck{ready, sched, gpus}
	return h
}

// quarantinable reports whether a verdict quarantines its node: unhealthy, and not for
// a reason that is somebody else's decision or more likely the probe's fault.
func quarantinable(h backend.NodeHealth) bool {
	if h.Healthy {
		return false
	}
	switch h.Reason {
	case backend.ReasonCordoned, reasonProbeNotStarted, backend.ReasonQuarantined:
		return false
	}
	return true
}

// quarantined reports whether n carries the quarantine taint or label.
func quarantined(n *corev1.Node) bool {
	if n.Labels[LabelQuarantined] == "true" {
		return true
	}
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintQuarantined })
}

// quarantinedHealth is the verdict on a node quarantined by an earlier check.
func quarantinedHealth(n *corev1.Node, now time.Time) backend.NodeHealth {
	h := backend.NodeHealth{
		Node: n.Name, Reason: backend.ReasonQuarantined, CheckedAt: now,
		Quarantined: true, QuarantinedAt: annotationTime(n, AnnotationQuarantinedAt),
	}
	h.Message = "quarantined"
	if h.QuarantinedAt != nil {
		h.Message += " since " + h.QuarantinedAt.Format(time.RFC3339)
	}
	if r := n.Annotations[AnnotationQuarantineReason]; r != "" {
		h.Message += ": " + r
	}
	return h
}

func annotationTime(n *corev1.Node, key string) *time.Time {
	t, err := time.Parse(time.RFC3339, n.Annotations[key])
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

func quarantineCount(n *corev1.Node) int {
	c, err := strconv.Atoi(n.Annotations[AnnotationQuarantineCount])
	if err != nil || c < 1 {
		return 1
	}
	return c
}

// recheckDue is when a quarantined node's next re-check is due: a backoff after its
// last check. A node whose annotations were lost is due at once.
func (b *Backend) recheckDue(n *corev1.Node) time.Time {
	last := annotationTime(n, AnnotationQuarantineCheckedAt)
	if last == nil {
		last = annotationTime(n, AnnotationQuarantinedAt)
	}
	if last == nil {
		return time.Time{}
	}
	return last.Add(b.quarantineBackoff(quarantineCount(n)))
}

// reasonText is what AnnotationQuarantineReason holds, bounded.
func reasonText(h backend.NodeHealth) string {
	s := joinReason(h.Reason, h.Message)
	if len(s) > 1024 {
		s = s[:1021] + "..."
	}
	return s
}

func splitReason(s string) (reason, msg string) {
	reason, msg, _ = strings.Cut(s, ": ")
	return reason, msg
}

// maxNodePatchTries bounds the optimistic-concurrency retries of a node patch.
const maxNodePatchTries = 5

// patchNode applies edit to a fresh copy of the node and writes the result with a
// merge patch that carries the node's resourceVersion, retrying on conflicts. edit
// returns the patch (metadata labels/annotations with nil to remove, spec taints) or
// nil when nothing needs to change. It returns the node as written (or as read, when
// nothing changed), nil if the node no longer exists.
func (b *Backend) patchNode(ctx context.Context, name string, edit func(n *corev1.Node) map[string]any) (*corev1.Node, error) {
	for try := 1; ; try++ {
		n, err := b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kube: get node %s: %w", name, err)
		}
		patch := edit(n)
		if patch == nil {
			return n, nil
		}
		meta, _ := patch["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			patch["metadata"] = meta
		}
		meta["resourceVersion"] = n.ResourceVersion
		data, err := json.Marshal(patch)
		if err != nil {
			return nil, fmt.Errorf("kube: patch node %s: %w", name, err)
		}
		out, err := b.client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
		switch {
		case err == nil:
			return out, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsConflict(err) && try < maxNodePatchTries:
			continue
		}
		return nil, fmt.Errorf("kube: patch node %s: %w", name, err)
	}
}

// quarantineTaint is the taint of a quarantined node.
func quarantineTaint(now time.Time) corev1.Taint {
	t := metav1.NewTime(now)
	return corev1.Taint{Key: TaintQuarantined, Value: "true", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &t}
}

// withTaint returns taints with the quarantine taint, added if missing.
func withTaint(taints []corev1.Taint, now time.Time) ([]corev1.Taint, bool) {
	if slices.ContainsFunc(taints, func(t corev1.Taint) bool {
		return t.Key == TaintQuarantined && t.Effect == corev1.TaintEffectNoSchedule
	}) {
		return taints, false
	}
	return append(slices.Clone(taints), quarantineTaint(now)), true
}

// quarantine taints, labels and annotates the node as unhealthy for h's reason. It is
// idempotent: a node already quarantined keeps its quarantine (time, count, reason,
// quarantining check); only a missing taint is put back. It returns h with the
// quarantine's facts, and whether the quarantine is the check by's own (false when a
// concurrent check quarantined the node first, or the node no longer exists).
func (b *Backend) quarantine(ctx context.Context, name string, h backend.NodeHealth, by string) (backend.NodeHealth, bool, error) {
	now := b.healthNow().UTC().Truncate(time.Second)
	n, err := b.patchNode(ctx, name, func(n *corev1.Node) map[string]any {
		taints, added := withTaint(n.Spec.Taints, now)
		if n.Labels[LabelQuarantined] == "true" && n.Annotations[AnnotationQuarantinedAt] != "" {
			if !added {
				return nil
			}
			return map[string]any{"spec": map[string]any{"taints": taints}}
		}
		return map[string]any{
			"metadata": map[string]any{
				"labels": map[string]any{LabelQuarantined: "true"},
				"annotations": map[string]any{
					AnnotationQuarantineReason:    reasonText(h),
					AnnotationQuarantinedAt:       now.Format(time.RFC3339),
					AnnotationQuarantineCheckedAt: now.Format(time.RFC3339),
					AnnotationQuarantineCount:     "1",
					AnnotationQuarantinedBy:       by,
				},
			},
			"spec": map[string]any{"taints": taints},
		}
	})
	if err != nil || n == nil {
		return h, false, err
	}
	h.Quarantined = true
	h.QuarantinedAt = annotationTime(n, AnnotationQuarantinedAt)
	mine := n.Annotations[AnnotationQuarantinedBy] == by
	if mine {
		b.logger.Info("kube: node quarantined", "node", name, "reason", h.Reason, "message", h.Message, "check", by)
	}
	return h, mine, nil
}

// recordFailure records a failed re-check: one more failure, a longer backoff, the
// latest reason. The taint and label are put back if someone removed one of them.
func (b *Backend) recordFailure(ctx context.Context, name string, h backend.NodeHealth) (backend.NodeHealth, error) {
	now := b.healthNow().UTC().Truncate(time.Second)
	n, err := b.patchNode(ctx, name, func(n *corev1.Node) map[string]any {
		taints, _ := withTaint(n.Spec.Taints, now)
		ann := map[string]any{
			AnnotationQuarantineReason:    reasonText(h),
			AnnotationQuarantineCheckedAt: now.Format(time.RFC3339),
			AnnotationQuarantineCount:     strconv.Itoa(quarantineCount(n) + 1),
		}
		if n.Annotations[AnnotationQuarantinedAt] == "" {
			ann[AnnotationQuarantinedAt] = now.Format(time.RFC3339)
		}
		return map[string]any{
			"metadata": map[string]any{"labels": map[string]any{LabelQuarantined: "true"}, "annotations": ann},
			"spec":     map[string]any{"taints": taints},
		}
	})
	if err != nil || n == nil {
		return h, err
	}
	h.Quarantined = true
	h.QuarantinedAt = annotationTime(n, AnnotationQuarantinedAt)
	return h, nil
}

// release removes the quarantine: taint, label and annotations. Releasing a node that
// is not quarantined changes nothing. It returns h with the quarantine's start, which
// identifies the quarantine that ended.
func (b *Backend) release(ctx context.Context, name string, h backend.NodeHealth) (backend.NodeHealth, error) {
	var since *time.Time
	_, err := b.patchNode(ctx, name, func(n *corev1.Node) map[string]any {
		since = annotationTime(n, AnnotationQuarantinedAt)
		if !quarantined(n) && n.Annotations[AnnotationQuarantinedAt] == "" {
			return nil
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != TaintQuarantined {
				taints = append(taints, t)
			}
		}
		ann := map[string]any{}
		for _, k := range []string{AnnotationQuarantineReason, AnnotationQuarantinedAt, AnnotationQuarantineCount,
			AnnotationQuarantineCheckedAt, AnnotationQuarantinedBy} {
			ann[k] = nil
		}
		return map[string]any{
			"metadata": map[string]any{"labels": map[string]any{LabelQuarantined: nil}, "annotations": ann},
			"spec":     map[string]any{"taints": taints},
		}
	})
	if err != nil {
		return h, err
	}
	h.Quarantined, h.QuarantinedAt = false, since
	b.logger.Info("kube: node released from quarantine", "node", name)
	return h, nil
}

// jobCheckPodName is the check pod of a node for one attempt of a job:
// <job>-check-a<attempt>-<hash of the node's name>.
func jobCheckPodName(ref backend.GangRef, node string) string {
	return shorten(fmt.Sprintf("%s-check-a%d-%s", ref.Job, ref.Attempt, nodeHash(node)), maxLabel)
}

// recheckPodName is the check pod of a quarantined node's re-check after count
// failures: recheck-<hash of the node's name>-<count>. A retried re-check finds the
// pod of its first run; the next one (after another failure) gets a new name.
func recheckPodName(node string, count int) string {
	return fmt.Sprintf("recheck-%s-%d", nodeHash(node), count)
}

func nodeHash(node string) string {
	sum := sha256.Sum256([]byte(node))
	return hex.EncodeToString(sum[:])[:10]
}

// checkPod is the pod that probes node n.
func (b *Backend) checkPod(ns, name string, n *corev1.Node, timeout time.Duration, labels map[string]string) *corev1.Pod {
	image, command := b.health.image, b.health.command
	if image == "" {
		image, command = DefaultHealthProbeImage, DefaultHealthProbeCommand
	}
	labels[LabelManagedBy] = ManagedByValue
	labels[LabelNode] = shorten(n.Name, maxLabel)
	annotations := maps.Clone(b.health.annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AnnotationNode] = n.Name
	gpus := n.Status.Capacity[ResourceGPU]
	env := []corev1.EnvVar{{Name: "DLC_NODE", Value: n.Name}, {Name: "DLC_NODE_GPUS", Value: strconv.FormatInt(gpus.Value(), 10)}}
	if gpus.Value() > 0 {
		// Every GPU of the node, without allocating one: the NVIDIA runtime's own
		// switch. Training pods keep the GPUs they were given.
		env = append(env, corev1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"})
	}
	runAs := b.runAsUser
	if runAs == nil {
		runAs = ptr[int64](65534) // nobody: nvidia-smi needs no privilege
	}
	deadline := int64(math.Ceil(timeout.Seconds()))
	grace := int64(1)
	var pullSecrets []corev1.LocalObjectReference
	for _, s := range b.pullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:      n.Name,
			RestartPolicy: corev1.RestartPolicyNever,
			// The node is judged whatever its taints, the quarantine's included.
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(false),
			EnableServiceLinks:            new(false),
			ImagePullSecrets:              pullSecrets,
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   new(true),
				RunAsUser:      runAs,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:            ContainerName,
				Image:           image,
				ImagePullPolicy: b.pullPolicy,
				Command:         escapeAll(command),
				Env:             env,
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
		},
	}
}

// reasonProbeNotStarted: the check pod could not start (its image cannot be pulled,
// its configuration is refused). The node is reported unhealthy but not quarantined.
const reasonProbeNotStarted = "ProbeNotStarted"

// notStarting are waiting reasons that mean the check pod will not start by itself.
var notStarting = map[string]bool{
	"ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true,
}

// probeResult is the outcome of one check pod.
type probeResult struct {
	ok      bool
	reason  string
	message string
}

// probeParallelism bounds the check pod creations and deletions in flight.
const probeParallelism = 8

// probe creates the check pods (a pod that exists already counts as created: a retried
// check reads the first run's outcome), waits until each has finished or timeout has
// passed, then deletes them. It returns one result per pod, in order.
func (b *Backend) probe(ctx context.Context, pods []*corev1.Pod, timeout time.Duration) ([]probeResult, error) {
	b.cache.start()
	defer func() {
		// Delete whatever happens, also when ctx was cancelled.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = forEachPod(pods, probeParallelism, func(p *corev1.Pod) error {
			zero := int64(0)
			err := b.client.CoreV1().Pods(p.Namespace).Delete(dctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			if err != nil && !apierrors.IsNotFound(err) {
				b.logger.Warn("kube: could not delete check pod", "pod", p.Namespace+"/"+p.Name, "error", err)
			}
			return nil
		})
	}()
	if err := forEachPod(pods, probeParallelism, func(p *corev1.Pod) error { return b.createPod(ctx, p) }); err != nil {
		return nil, err
	}

	results := make([]probeResult, len(pods))
	done := make([]bool, len(pods))
	last := make([]*corev1.Pod, len(pods))
	left := len(pods)
	deadline := b.clock.Now().Add(timeout)
	for left > 0 {
		changed := b.cache.changes()
		for i, want := range pods {
			if done[i] {
				continue
			}
			p, err := b.cache.pod(ctx, want.Namespace, want.Name)
			if err != nil {
				return nil, err
			}
			if p == nil {
				// Deleted under us (by a person, or by an earlier run's cleanup racing
				// this one): create it again while there is time.
				if err := b.createPod(ctx, want); err != nil {
					return nil, err
				}
				continue
			}
			last[i] = p
			if r, ok := probeOutcome(p); ok {
				results[i], done[i] = r, true
				left--
			}
		}
		if left == 0 {
			break
		}
		if !b.clock.Now().Before(deadline) {
			for i := range pods {
				if !done[i] {
					results[i] = probeResult{reason: backend.ReasonProbeTimeout,
						message: fmt.Sprintf("check pod %s did not finish within %s: %s", pods[i].Name, timeout, podState(last[i]))}
				}
			}
			break
		}
		wait := min(b.poll, deadline.Sub(b.clock.Now()))
		if err := b.wait(ctx, changed, max(wait, time.Millisecond)); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// probeOutcome judges a check pod; false while it has not finished.
func probeOutcome(p *corev1.Pod) (probeResult, bool) {
	cs := mainStatus(p)
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return probeResult{ok: true, message: "check pod " + p.Name + " succeeded"}, true
	case corev1.PodFailed:
		msg := joinReason(p.Status.Reason, p.Status.Message)
		if cs != nil && cs.State.Terminated != nil {
			t := cs.State.Terminated
			msg = joinReason(msg, joinReason(fmt.Sprintf("exit code %d", t.ExitCode), joinReason(t.Reason, strings.TrimSpace(t.Message))))
		}
		return probeResult{reason: backend.ReasonProbeFailed, message: "check pod " + p.Name + " failed: " + msg}, true
	}
	if p.DeletionTimestamp != nil {
		return probeResult{}, false // an earlier run's pod on its way out; we recreate it once gone
	}
	if cs != nil && cs.State.Waiting != nil && notStarting[cs.State.Waiting.Reason] {
		return probeResult{reason: reasonProbeNotStarted,
			message: "check pod " + p.Name + " could not start: " + joinReason(cs.State.Waiting.Reason, cs.State.Waiting.Message)}, true
	}
	return probeResult{}, false
}

// podState describes an unfinished check pod for a timeout message.
func podState(p *corev1.Pod) string {
	if p == nil {
		return "it was never seen"
	}
	if cs := mainStatus(p); cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
		return "phase " + string(p.Status.Phase) + ", " + joinReason(cs.State.Waiting.Reason, cs.State.Waiting.Message)
	}
	phase := string(p.Status.Phase)
	if phase == "" {
		phase = "Pending"
	}
	return "phase " + phase
}

// withProbe adds a probe's outcome to a node's verdict.
func withProbe(h backend.NodeHealth, r probeResult) backend.NodeHealth {
	h.Checks = append(h.Checks, events.HealthCheck{Name: backend.CheckProbe, OK: r.ok, Message: r.message})
	if !r.ok {
		h.Healthy, h.Reason, h.Message = false, r.reason, r.message
	}
	return h
}

// forEachPod runs fn on every pod, parallelism at a time, and returns the first error
// in pod order.
func forEachPod(pods []*corev1.Pod, parallelism int, fn func(*corev1.Pod) error) error {
	errs := make([]error, len(pods))
	sem := make(chan struct{}, parallelism)
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(p)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// staleCheckPodAfter is how long past its deadline a check pod may stay before the
// sweep deletes it: by then the check that created it has given up.
const staleCheckPodAfter = 10 * time.Minute

// sweepCheckPods deletes check pods that outlived their check.
func (b *Backend) sweepCheckPods(ctx context.Context) error {
	var items []corev1.Pod
	for _, ns := range b.listNamespaces() {
		list, err := b.client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: LabelHealthCheck})
		if err != nil {
			return fmt.Errorf("kube: list check pods: %w", err)
		}
		items = append(items, list.Items...)
	}
	now := b.clock.Now()
	for i := range items {
		p := &items[i]
		if p.DeletionTimestamp != nil || p.Labels[LabelManagedBy] != ManagedByValue {
			continue
		}
		life := time.Duration(0)
		if d := p.Spec.ActiveDeadlineSeconds; d != nil {
			life = time.Duration(*d) * time.Second
		}
		if now.Sub(p.CreationTimestamp.Time) < life+staleCheckPodAfter {
			continue
		}
		if err := b.deletePod(ctx, p, 0); err != nil {
			return err
		}
	}
	return nil
}
