package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/kubestack"
	"github.com/opendlc/opendlc/schemas"
)

// Recovery benchmarks: how long a training job is down after a fault, from the fault
// to the job running again (kube: replacement pods Running; local: the trainer's first
// metric line after resuming from its checkpoint), next to what the platform underneath
// does on its own in the same run.

// trainerArgs slow the example trainer down enough to be killed mid-run: an epoch takes
// milliseconds, the sleep after it 250ms.
var trainerArgs = []string{"--epochs", "40", "--lr", "0.2", "--epoch-sleep", "250ms", "--async-checkpoint"}

// localRecovery is one SIGKILL of a trainer replica, measured from the kill.
type localRecovery struct {
	seen, released, running, metric time.Duration
	resumedFrom                     string
}

// runLocalRecovery kills rank 1 of a 2-replica example trainer job, n times, each once
// a checkpoint is complete, and reports the time to the first metric line of the
// restarted attempt, next to starting both ranks directly from the same checkpoint.
func runLocalRecovery(ctx context.Context, c *client.Client, store *checkpoint.Store, trainer string, s3env []string, n int) error {
	var runs []localRecovery
	var floor []time.Duration
	for i := range n {
		r, err := oneLocalRecovery(ctx, c, store, trainer, i)
		if err != nil {
			return fmt.Errorf("recovery %d: %w", i, err)
		}
		runs = append(runs, r)
		f, err := directResume(ctx, trainer, s3env, r.resumedFrom)
		if err != nil {
			return fmt.Errorf("direct resume %d: %w", i, err)
		}
		floor = append(floor, f)
	}
	pick := func(f func(localRecovery) time.Duration) []time.Duration {
		var out []time.Duration
		for _, r := range runs {
			out = append(out, f(r))
		}
		return out
	}
	fmt.Printf("\nRecovery, local backend: SIGKILL of rank 1 of a 2-replica example trainer job (maxRestarts 1,\n")
	fmt.Printf("checkpoint every epoch), %d runs; times from the kill; the floor starts both ranks from the\n", n)
	fmt.Printf("same checkpoint by hand (no failure to detect, no backoff), times to their first metric line\n\n")
	fmt.Printf("%-60s %10s %10s %10s %8s\n", "measure", "min", "median", "max", "ratio")
	row := func(name string, xs []time.Duration, ratio bool) {
		r := ""
		if ratio {
			r = fmt.Sprintf("%7.2fx", float64(median(xs))/float64(median(floor)))
		}
		fmt.Printf("%-60s %10s %10s %10s %8s\n", name, minDur(xs), median(xs), maxDur(xs), r)
	}
	metric := pick(func(r localRecovery) time.Duration { return r.metric })
	lessBackoff := make([]time.Duration, len(metric))
	for i, d := range metric {
		lessBackoff[i] = d - dlcRestartBackoff
	}
	row("floor: both ranks from the checkpoint -> first metric line", floor, false)
	row("kill -> failure seen by the workflow", pick(func(r localRecovery) time.Duration { return r.seen }), false)
	row("kill -> failed gang released", pick(func(r localRecovery) time.Duration { return r.released }), false)
	row("kill -> attempt 1 Running (with the 1s backoff)", pick(func(r localRecovery) time.Duration { return r.running }), false)
	row("kill -> first metric line of attempt 1 (with the 1s backoff)", metric, false)
	row("kill -> first metric line of attempt 1, minus the 1s backoff", lessBackoff, true)
	atMostDur("local: kill -> failure seen by the workflow (median)", median(pick(func(r localRecovery) time.Duration { return r.seen })), 10*time.Millisecond)
	atMostRatio("local recovery: kill -> first metric line less backoff, over the floor", float64(median(lessBackoff))/float64(median(floor)), 1.5)
	return nil
}

func oneLocalRecovery(ctx context.Context, c *client.Client, store *checkpoint.Store, trainer string, i int) (localRecovery, error) {
	const ws = "bench"
	name := fmt.Sprintf("recover-%d", i)
	uri := "s3://dlc/bench/" + name
	args := make([]string, 0, len(trainerArgs))
	for _, a := range trainerArgs {
		args = append(args, strconv.Quote(a))
	}
	spec := itest.JobDoc(name, ws, fmt.Sprintf(`
  framework: pytorch
  command: [sh, -c, 'echo pid=$$; exec "$0" "$@"', %q]
  args: [%s]
  roles: {worker: {replicas: 2}}
  checkpoint: {uri: %q}
  faultTolerance: {maxRestarts: 1}
`, trainer, strings.Join(args, ", "), uri))
	if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
		return localRecovery{}, err
	}
	defer func() { _, _ = c.StopJob(context.WithoutCancel(ctx), ws, name, "bench done") }()

	// Rank 1's pid, once rank 0 has a complete checkpoint.
	var pid int
	err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		if pid == 0 {
			err := c.Logs(ctx, ws, name, client.LogOptions{}, func(r events.LogRecord) error {
				if v, ok := strings.CutPrefix(r.Line, "pid="); ok && r.Attempt == 0 && r.Index == 1 {
					pid, _ = strconv.Atoi(v)
				}
				return nil
			})
			if err != nil || pid == 0 {
				return false, err
			}
		}
		_, err := store.Latest(ctx, uri)
		return err == nil, nil
	})
	if err != nil {
		return localRecovery{}, fmt.Errorf("waiting for a checkpoint: %w", err)
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return localRecovery{}, err
	}

	var metricAt time.Time
	err = poll(ctx, 20*time.Millisecond, func() (bool, error) {
		err := c.Logs(ctx, ws, name, client.LogOptions{}, func(r events.LogRecord) error {
			if _, ok := events.ParseMetricLine(r.Line); ok && r.Attempt == 1 && r.Index == 0 && metricAt.IsZero() {
				metricAt = r.Time
			}
			return nil
		})
		return !metricAt.IsZero(), err
	})
	if err != nil {
		return localRecovery{}, fmt.Errorf("waiting for the resumed attempt's first metric: %w", err)
	}
	j, err := c.GetJob(ctx, ws, name)
	if err != nil {
		return localRecovery{}, err
	}
	st := j.Status
	if len(st.Attempts) < 2 || st.Attempts[0].FaultTime == nil || st.Attempts[0].ReleasedTime == nil || st.Attempts[1].RunningTime == nil {
		return localRecovery{}, fmt.Errorf("unexpected attempts %+v", st.Attempts)
	}
	if a0 := st.Attempts[0]; a0.Class != schemas.FailureSignal {
		return localRecovery{}, fmt.Errorf("attempt 0 classified %s (%s), want Signal", a0.Class, a0.Message)
	}
	a0, a1 := st.Attempts[0], st.Attempts[1]
	if a1.ResumedFrom == "" {
		return localRecovery{}, errors.New("attempt 1 resumed from no checkpoint")
	}
	return localRecovery{
		seen: a0.FaultTime.Sub(killed), released: a0.ReleasedTime.Sub(killed),
		running: a1.RunningTime.Sub(killed), metric: metricAt.Sub(killed), resumedFrom: a1.ResumedFrom,
	}, nil
}

// directResume starts both ranks of the trainer by hand, resumed from ref, and times
// the first metric line of rank 0: the floor of any restart.
func directResume(ctx context.Context, trainer string, s3env []string, ref string) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	start := time.Now()
	var rank0 io.Reader
	logs := &syncBuffer{} // both ranks' stderr, for the error
	for rank := range 2 {
		cmd := exec.CommandContext(ctx, trainer, trainerArgs...)
		cmd.Stderr = logs
		cmd.Env = append(os.Environ(), s3env...)
		cmd.Env = append(cmd.Env, "DLC_RESUME_FROM="+ref, "WORLD_SIZE=2", "RANK="+strconv.Itoa(rank),
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
		if rank == 0 {
			if rank0, err = cmd.StdoutPipe(); err != nil {
				return 0, err
			}
		}
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	sc := bufio.NewScanner(rank0)
	for sc.Scan() {
		if _, ok := events.ParseMetricLine(sc.Text()); ok {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("rank 0 printed no metric line (%w):\n%s", sc.Err(), logs.String())
}

// syncBuffer collects the output of several processes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Restart backoffs of the two sides of the "pod exits 137" row. Kubernetes' Job
// controller waits 10 s before it replaces a first failed pod (its fixed initial pod
// failure back-off, not settable per Job); OpenDLC waits its restart backoff of 1 s
// (workflows/recovery.go) before the new attempt. The table shows both times with the
// side's backoff taken out, and no ratio: the controller counts its 10 s from the
// container's finish time, which the API keeps to the whole second, so the Job's time
// less 10 s is its own work give or take up to a second (runs of -0.44 s were seen),
// too coarse a base to divide by.
const (
	jobControllerBackoff = 10 * time.Second
	dlcRestartBackoff    = time.Second
)

// runKubeRecovery measures, on the kwok control plane, the time from a fault to the
// replacement pods Running, runs times each: a pod that exits 137, against a Kubernetes
// Job's own restart; a node that goes NotReady, against Kubernetes' taint-based eviction
// of a Deployment's pod on the same node that tolerates the not-ready node for as long
// as OpenDLC's node-lost grace (benchNodeLostGrace). When defaultEviction
// is set it also waits out, once, the 300 s the DefaultTolerationSeconds admission plugin
// gives every pod.
func runKubeRecovery(ctx context.Context, cluster *kubestack.Cluster, c *client.Client, runs int, defaultEviction bool) error {
	cs := cluster.Client
	var dlcFail, jobFail, dlcNode, depNode []time.Duration
	for r := range runs {
		d, err := kubeJobFault(ctx, cs, c, fmt.Sprintf("bench-rec-fail-%d", r), func(p corev1.Pod) error {
			return cluster.FailPod(ctx, p.Namespace, p.Name, 137)
		})
		if err != nil {
			return fmt.Errorf("pod failure: %w", err)
		}
		b, err := kubernetesJobFailure(ctx, cluster, fmt.Sprintf("bench-rec-job-%d", r))
		if err != nil {
			return fmt.Errorf("pod failure, Kubernetes Job: %w", err)
		}
		dlcFail, jobFail = append(dlcFail, d-dlcRestartBackoff), append(jobFail, b-jobControllerBackoff)
	}
	// The Deployment's pod tolerates the not-ready node as long as OpenDLC's node-lost
	// grace lets a replica stay on it: both sides wait the same before they replace.
	grace := int64(benchNodeLostGrace / time.Second)
	for r := range runs {
		d, b, err := nodeNotReady(ctx, cluster, c, r, &grace, 1)
		if err != nil {
			return err
		}
		dlcNode, depNode = append(dlcNode, d-dlcRestartBackoff), append(depNode, b...)
	}

	fmt.Printf("\nRecovery on the kwok control plane (%d nodes): fault -> replacement pods Running, %d runs each\n", len(cluster.Nodes), runs)
	fmt.Printf("(OpenDLC: a 2-replica job restarted as a new attempt; Job: 2 pods, the failed one replaced)\n\n")
	fmt.Printf("%-58s %10s %10s %10s %8s\n", "fault, side", "min", "median", "max", "ratio")
	row := func(name string, xs []time.Duration, base []time.Duration) {
		ratio := ""
		if base != nil {
			ratio = fmt.Sprintf("%7.2fx", float64(median(xs))/float64(median(base)))
		}
		fmt.Printf("%-58s %10s %10s %10s %8s\n", name, minDur(xs), median(xs), maxDur(xs), ratio)
	}
	row("pod exits 137, Job controller, minus its 10s backoff (±1s)", jobFail, nil)
	row("pod exits 137, OpenDLC, minus its 1s backoff", dlcFail, nil)
	row(fmt.Sprintf("node NotReady, Deployment, not-ready toleration %ds", grace), depNode, nil)
	row(fmt.Sprintf("node NotReady, OpenDLC, node-lost grace %s, minus 1s backoff", benchNodeLostGrace), dlcNode, depNode)

	if defaultEviction {
		// One fault, runs Deployments' pods on the node: runs figures in one wait of
		// about 5 minutes instead of runs of them. OpenDLC's side does not depend on the
		// pods' tolerations; its figures are the row above.
		fmt.Printf("\n(waiting once for Kubernetes' default eviction of %d Deployments' pods on one node, about 5 minutes)\n", runs)
		_, b, err := nodeNotReady(ctx, cluster, c, runs, nil, runs)
		if err != nil {
			return err
		}
		row(fmt.Sprintf("node NotReady, %d Deployments, default toleration (300s)", runs), b, nil)
	}
	return nil
}

// nodeNotReady runs a 2-replica job and, on the node of its first pod, deployments
// 1-replica Deployments whose pods tolerate a not-ready node for toleration seconds
// (nil: what admission gives); then it makes the node NotReady and times, from that
// moment, the job's replacement pods Running and each Deployment's replacement pod
// Running. Run r uses its own workspace and namespace. The node is Ready again when it
// returns.
func nodeNotReady(ctx context.Context, cluster *kubestack.Cluster, c *client.Client, r int, toleration *int64, deployments int) (dlc time.Duration, dep []time.Duration, err error) {
	cs := cluster.Client
	ns := fmt.Sprintf("bench-rec-evict-%d", r)
	if err := createNamespace(ctx, cs, ns); err != nil {
		return 0, nil, err
	}
	var node string
	pods := make([]string, deployments)
	dep = make([]time.Duration, deployments)
	depErrs := make([]error, deployments)
	var wg sync.WaitGroup
	dlc, err = kubeJobFault(ctx, cs, c, fmt.Sprintf("bench-rec-node-%d", r), func(p corev1.Pod) error {
		node = p.Spec.NodeName
		for i := range deployments {
			dp, err := deployOn(ctx, cs, ns, fmt.Sprintf("dep%d", i), node, toleration)
			if err != nil {
				return err
			}
			pods[i] = dp.Name
		}
		return cluster.SetNodeNotReady(ctx, node)
	}, func(start time.Time) {
		for i := range deployments {
			wg.Go(func() {
				_, dep[i], depErrs[i] = waitReplaced(ctx, cs, ns, fmt.Sprintf("dep%d", i), pods[i], start)
			})
		}
	})
	if err != nil {
		return 0, nil, fmt.Errorf("node NotReady: %w", err)
	}
	wg.Wait()
	if err := errors.Join(depErrs...); err != nil {
		return 0, nil, fmt.Errorf("node NotReady, Deployment: %w", err)
	}
	if err := cluster.SetNodeReady(ctx, node); err != nil {
		return 0, nil, err
	}
	return dlc, dep, waitNodeReady(ctx, cs, node)
}

// kubeJobFault submits a 2-replica job in workspace ws, waits until it runs, injects a
// fault on its first pod, and times until both pods of attempt 1 run. started, when
// given, runs right after the fault, with the time it was injected.
func kubeJobFault(ctx context.Context, cs kubernetes.Interface, c *client.Client, ws string, fault func(corev1.Pod) error, started ...func(time.Time)) (time.Duration, error) {
	spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":"job","workspace":%q},
"spec":{"framework":"pytorch","image":"registry.local/train:1.4","command":["train"],"roles":{"worker":{"replicas":2}},
"faultTolerance":{"maxRestarts":2},"logs":{"forward":false}}}`, ws)
	if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
		return 0, err
	}
	defer func() { _, _ = c.StopJob(context.WithoutCancel(ctx), ws, "job", "bench done") }()
	if err := waitRunning(ctx, cs, ws, "opendlc.io/job=job,opendlc.io/attempt=0", 2); err != nil {
		return 0, err
	}
	if err := poll(ctx, 20*time.Millisecond, func() (bool, error) {
		j, err := c.GetJob(ctx, ws, "job")
		return err == nil && j.Status.Phase == schemas.JobRunning, nil
	}); err != nil {
		return 0, err
	}
	pods, err := cs.CoreV1().Pods(ws).List(ctx, metav1.ListOptions{LabelSelector: "opendlc.io/job=job,opendlc.io/attempt=0,opendlc.io/replica-index=0"})
	if err != nil || len(pods.Items) != 1 {
		return 0, fmt.Errorf("pod 0 of attempt 0: %d pods, %w", len(pods.Items), err)
	}
	if err := fault(pods.Items[0]); err != nil {
		return 0, err
	}
	start := time.Now()
	for _, f := range started {
		f(start)
	}
	if err := waitRunning(ctx, cs, ws, "opendlc.io/job=job,opendlc.io/attempt=1", 2); err != nil {
		return 0, err
	}
	took := time.Since(start)
	j, err := c.GetJob(ctx, ws, "job")
	if err != nil {
		return 0, err
	}
	if !restartedOnce(j) {
		return 0, fmt.Errorf("job status %+v: want one restart", j.Status)
	}
	return took, nil
}

func restartedOnce(j *api.Job) bool {
	return j.Status.Attempt == 1 && j.Status.Restarts == 1
}

// kubernetesJobFailure runs an indexed batch/v1 Job of two pods in namespace ns (as
// the OpenDLC side runs two replicas), fails the pod of index 0 with exit code 137, and
// times until the Job controller's replacement for it runs.
func kubernetesJobFailure(ctx context.Context, cluster *kubestack.Cluster, ns string) (time.Duration, error) {
	cs := cluster.Client
	if err := createNamespace(ctx, cs, ns); err != nil {
		return 0, err
	}
	backoff, two, indexed := int32(6), int32(2), batchv1.IndexedCompletion
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "plain"},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff, Parallelism: &two, Completions: &two, CompletionMode: &indexed,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"bench": "job"}},
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.local/train:1.4", Command: []string{"train"}}},
				},
			},
		},
	}
	if _, err := cs.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	if err := waitRunning(ctx, cs, ns, "bench=job", 2); err != nil {
		return 0, err
	}
	index0 := "bench=job," + batchv1.JobCompletionIndexAnnotation + "=0"
	pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: index0})
	if err != nil || len(pods.Items) != 1 {
		return 0, fmt.Errorf("the Job's pod of index 0: %d pods, %w", len(pods.Items), err)
	}
	first := pods.Items[0].Name
	if err := cluster.FailPod(ctx, ns, first, 137); err != nil {
		return 0, err
	}
	start := time.Now()
	err = poll(ctx, 20*time.Millisecond, func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: index0})
		if err != nil {
			return false, nil //nolint:nilerr // a failed poll is retried until ctx ends
		}
		for _, p := range l.Items {
			if p.Name != first && p.Status.Phase == corev1.PodRunning {
				return true, nil
			}
		}
		return false, nil
	})
	return time.Since(start), err
}

// deployOn creates a 1-replica Deployment whose pod prefers node, and returns its pod
// once it runs there. toleration, when set, replaces the not-ready and unreachable
// NoExecute tolerations' seconds; nil leaves them to admission.
func deployOn(ctx context.Context, cs kubernetes.Interface, ns, name, node string, toleration *int64) (corev1.Pod, error) {
	one := int32(1)
	labels := map[string]string{"bench": name}
	spec := corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "registry.local/train:1.4", Command: []string{"train"}}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 100,
				Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}},
			}},
		}},
	}
	if toleration != nil {
		for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
			spec.Tolerations = append(spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: toleration,
			})
		}
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return corev1.Pod{}, err
	}
	if err := waitRunning(ctx, cs, ns, "bench="+name, 1); err != nil {
		return corev1.Pod{}, err
	}
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench=" + name})
	if err != nil || len(l.Items) != 1 {
		return corev1.Pod{}, fmt.Errorf("pods of %s: %d, %w", name, len(l.Items), err)
	}
	if p := l.Items[0]; p.Spec.NodeName != node {
		return corev1.Pod{}, fmt.Errorf("the scheduler put %s on %s, not on %s", p.Name, p.Spec.NodeName, node)
	}
	return l.Items[0], nil
}

// waitReplaced waits until pod of a Deployment is gone (evicted) and another of its
// pods runs, and returns both times from start.
func waitReplaced(ctx context.Context, cs kubernetes.Interface, ns, name, pod string, start time.Time) (evicted, replaced time.Duration, err error) {
	err = poll(ctx, 50*time.Millisecond, func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "bench=" + name})
		if err != nil {
			return false, nil //nolint:nilerr // a failed poll is retried until ctx ends
		}
		gone := true
		for _, p := range l.Items {
			switch {
			case p.Name == pod && p.DeletionTimestamp == nil:
				gone = false
			case p.Name != pod && p.Status.Phase == corev1.PodRunning && replaced == 0:
				replaced = time.Since(start)
			}
		}
		if gone && evicted == 0 {
			evicted = time.Since(start)
		}
		return evicted > 0 && replaced > 0, nil
	})
	return evicted, replaced, err
}

func createNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Pods are refused until the namespace's default service account exists.
	return poll(ctx, 50*time.Millisecond, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// waitNodeReady waits until node is Ready with no not-ready or unreachable taint.
func waitNodeReady(ctx context.Context, cs kubernetes.Interface, node string) error {
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil || !kubestack.NodeReady(n) {
			return false, nil //nolint:nilerr // a failed poll is retried until ctx ends
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return false, nil
			}
		}
		return true, nil
	})
}

// poll calls cond every interval until it reports true or an error, or ctx ends.
func poll(ctx context.Context, interval time.Duration, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
