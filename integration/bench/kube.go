package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/kubestack"
)

// kubeForwardLogs is -kube-logs: whether OpenDLC's side forwards its pods' logs (the
// default, as a job does unless its spec says otherwise). The baseline reads no log;
// without forwarding both sides do the same work on the API server and kwok.
var kubeForwardLogs = true

// benchKubeNodes is how many kwok nodes the bench's control plane has: room for a
// 256-replica job (110 pods a node).
const benchKubeNodes = 4

// runKube measures, on the test control plane (kwok nodes), the time from submitting a
// job of n replicas to all its pods Running, next to plain client-go creating the same
// number of pods and waiting for them to run, in the same run; then recovery from pod
// and node failures (runKubeRecovery) and from lost node heartbeats (runKubeLeaseExpiry).
func runKube(sizes []int, runs int, defaultEviction bool, leaseRuns int, recovery, trace bool) error {
	// 4 sizes up to 256 replicas and 4 recovery measures, runs times each on both sides.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Hour)
	defer cancel()
	defer printGoals()
	dir, err := os.MkdirTemp("", "opendlc-bench-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	k, err := startKubeWorker(ctx, dir, kubeWorkerOptions{nodes: benchKubeNodes, backend: []kube.Option{
		kube.WithPollInterval(100 * time.Millisecond), kube.WithNodeLostGrace(benchNodeLostGrace),
	}})
	if err != nil {
		return err
	}
	defer k.close()
	cluster, c := k.cluster, k.c
	// The baseline's requests and the bench's polling go through a clientset of their
	// own, with the same limits as the worker's (kubestack's client QPS and burst).
	plainCS, err := kubernetes.NewForConfig(rest.CopyConfig(cluster.Admin))
	if err != nil {
		return err
	}

	temporalAddr := ""
	if trace {
		temporalAddr = k.e.AppConfig(app.Config{}).TemporalAddress
	}
	if err := runKubeLaunch(ctx, cluster, plainCS, c, sizes, runs, temporalAddr); err != nil {
		return err
	}
	if !recovery {
		return nil
	}
	if err := runKubeRecovery(ctx, cluster, c, runs, defaultEviction); err != nil {
		return err
	}
	return runKubeLeaseExpiry(ctx, cluster, c, leaseRuns)
}

// runKubeLaunch measures, for each size, submit -> all pods Running of an n-replica job
// against plain client-go doing the same work under the same clock, runs times each, the
// two sides taking turns. Both sides start in a namespace that does not exist yet: OpenDLC
// creates its workspace's namespace, its headless Service, its S3 Secret and its pods (at
// most kube.CreateParallelism creations in flight); the baseline creates a namespace,
// waits for its default service account (as a pod needs it), creates a headless Service
// and the pods with the same bound. OpenDLC's clock starts before the submit request and
// so includes the API server, the Temporal workflow and its activities. With a
// temporalAddr (-launch-trace), it also prints where each side's time went: the medians
// of launchSteps, and the activities of the last OpenDLC run of each size.
func runKubeLaunch(ctx context.Context, cluster *kubestack.Cluster, cs kubernetes.Interface, c *client.Client, sizes []int, runs int, temporalAddr string) error {
	fmt.Printf("submit -> all pods Running on the kwok control plane (%d nodes), OpenDLC vs plain client-go doing the same work, %d runs each\n\n",
		len(cluster.Nodes), runs)
	fmt.Printf("%-9s %-10s %10s %10s %10s %14s\n", "replicas", "side", "min", "median", "max", "median ratio")
	shape, err := captureShape(ctx, cs, c)
	if err != nil {
		return err
	}
	for _, n := range sizes {
		var dlc, plain []time.Duration
		var dlcSteps, plainSteps []launchSteps
		var lastWS string
		var lastSubmit time.Time
		for r := range runs {
			ws := fmt.Sprintf("bench-%d-%d", n, r)
			base, err := plainPods(ctx, cs, shape, ws+"-plain", n)
			if err != nil {
				return err
			}
			lastWS, lastSubmit = ws, time.Now()
			took, err := dlcPods(ctx, cs, c, ws, n)
			if err != nil {
				if temporalAddr != "" {
					// Where the failing run's workflow stood: its workflow task failures.
					_ = printJobHistory(context.WithoutCancel(ctx), temporalAddr, ws, "job", lastSubmit)
				}
				return err
			}
			plain, dlc = append(plain, base.allRunning), append(dlc, took.allRunning)
			plainSteps, dlcSteps = append(plainSteps, base), append(dlcSteps, took)
		}
		fmt.Printf("%-9d %-10s %10s %10s %10s\n", n, "client-go", minDur(plain), median(plain), maxDur(plain))
		fmt.Printf("%-9s %-10s %10s %10s %10s %13.2fx   (load %s)\n", "", "OpenDLC", minDur(dlc), median(dlc), maxDur(dlc),
			float64(median(dlc))/float64(median(plain)), loadAvg())
		if n >= 64 {
			atMostRatio(fmt.Sprintf("kube launch at %d replicas: OpenDLC over client-go (medians)", n), float64(median(dlc))/float64(median(plain)), 1.1)
		}
		if temporalAddr != "" {
			printSteps("client-go", plainSteps)
			printSteps("OpenDLC", dlcSteps)
			if err := printJobHistory(ctx, temporalAddr, lastWS, "job", lastSubmit); err != nil {
				return err
			}
		}
	}
	return nil
}

// dlcPods submits an n-replica job in workspace ws (a namespace not created yet) and
// waits until all its pods run; then it stops the job.
func dlcPods(ctx context.Context, cs kubernetes.Interface, c *client.Client, ws string, n int) (launchSteps, error) {
	spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":"job","workspace":%q},
"spec":{"framework":"pytorch","image":"registry.local/train:1.4","command":["train"],"roles":{"worker":{"replicas":%d}},"logs":{"forward":%t}}}`,
		ws, n, kubeForwardLogs)
	start := time.Now()
	if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
		return launchSteps{}, err
	}
	took, err := waitRunningSteps(ctx, cs, ws, "opendlc.io/job=job", n, start)
	if err != nil {
		return launchSteps{}, err
	}
	stopAt := time.Now()
	if err := stopJobRetrying(ctx, c, ws, "job"); err != nil {
		return launchSteps{}, err
	}
	took.stopped = time.Since(stopAt)
	err = waitNoPods(ctx, cs, ws, "opendlc.io/job=job")
	took.gone = time.Since(stopAt)
	return took, err
}

// plainPods does with client-go what OpenDLC does to launch an n-replica job in a new
// namespace (see runKubeLaunch), and waits until all the pods run.
func plainPods(ctx context.Context, cs kubernetes.Interface, shape gangShape, ns string, n int) (launchSteps, error) {
	start := time.Now()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return launchSteps{}, err
	}
	// Pods are refused until the namespace's default service account exists.
	if err := poll(ctx, 50*time.Millisecond, func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		return launchSteps{}, err
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, plainService(shape), metav1.CreateOptions{})
	if err != nil {
		return launchSteps{}, err
	}
	sem := make(chan struct{}, kube.CreateParallelism)
	errs := make(chan error, n)
	for i := range n {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := cs.CoreV1().Pods(ns).Create(ctx, plainPod(shape, svc, i), metav1.CreateOptions{})
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			return launchSteps{}, err
		}
	}
	took, err := waitRunningSteps(ctx, cs, ns, "bench=plain", n, start)
	if err != nil {
		return launchSteps{}, err
	}
	// Free the nodes for the next run, as OpenDLC's side stops its job.
	stopAt := time.Now()
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		return launchSteps{}, err
	}
	took.stopped = time.Since(stopAt)
	err = waitNoPods(ctx, cs, ns, "bench=plain")
	took.gone = time.Since(stopAt)
	return took, err
}

// waitNoPods waits until namespace ns has no pod that matches selector, so that the next
// run starts on empty nodes.
func waitNoPods(ctx context.Context, cs kubernetes.Interface, ns, selector string) error {
	return poll(ctx, 100*time.Millisecond, func() (bool, error) {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(l.Items) == 0, nil
	})
}

func waitRunning(ctx context.Context, cs kubernetes.Interface, ns, selector string, n int) error {
	for {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil {
			running := 0
			for _, p := range l.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
			}
			if running == n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pods of %s (%s) not all running: %w", ns, selector, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stopJobRetrying stops a job, asking again for up to 5 minutes while the API refuses:
// on a loaded machine a large job's workflow task can fail for a while (a timeout), and
// the stop update is refused until a retried task succeeds.
func stopJobRetrying(ctx context.Context, c *client.Client, ws, job string) error {
	ctx2, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var last error
	err := poll(ctx2, time.Second, func() (bool, error) {
		_, last = c.StopJob(ctx2, ws, job, "bench done")
		return last == nil, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("stop %s/%s: %w", ws, job, last)
	}
	return err
}
