package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/kubestack"
)

// runKube measures, on the test control plane (kwok nodes), the time from submitting a
// job of n replicas to all its pods Running, next to plain client-go creating the same
// number of pods and waiting for them to run, in the same run; then recovery from pod
// and node failures (runKubeRecovery) and from lost node heartbeats (runKubeLeaseExpiry).
func runKube(sizes []int, defaultEviction bool, leaseRuns int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "opendlc-bench-kube-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	cluster, err := kubestack.Start(ctx, kubestack.Options{Dir: filepath.Join(dir, "cluster")})
	if err != nil {
		return err
	}
	defer cluster.Close()
	e, err := embedded.Start(ctx, embedded.Config{Dir: filepath.Join(dir, "stack"), APIAddr: "127.0.0.1:0", NoWorker: true, Logger: quiet})
	if err != nil {
		return err
	}
	defer e.Close()
	backend, err := kube.New(cluster.Client, kube.WithPollInterval(100*time.Millisecond), kube.WithLogger(quiet),
		kube.WithNodeLostGrace(benchNodeLostGrace))
	if err != nil {
		return err
	}
	defer backend.Close()
	w, err := app.Start(ctx, e.AppConfig(app.Config{Worker: true, Backend: backend, Logger: quiet}))
	if err != nil {
		return err
	}
	defer w.Close()
	c, err := client.New(e.APIURL, client.WithToken(e.AdminToken))
	if err != nil {
		return err
	}

	fmt.Printf("submit -> all pods Running on the kwok control plane (3 nodes), OpenDLC vs plain client-go\n\n")
	fmt.Printf("%-9s %14s %14s %8s\n", "replicas", "OpenDLC", "client-go", "ratio")
	for _, n := range sizes {
		ns := fmt.Sprintf("bench-%d", n)
		base, err := plainPods(ctx, cluster.Client, ns+"-plain", n)
		if err != nil {
			return err
		}
		spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":"job","workspace":%q},
"spec":{"framework":"pytorch","image":"registry.local/train:1.4","command":["train"],"roles":{"worker":{"replicas":%d}}}}`, ns, n)
		start := time.Now()
		if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
			return err
		}
		if err := waitRunning(ctx, cluster.Client, ns, "opendlc.io/job=job", n); err != nil {
			return err
		}
		took := time.Since(start)
		fmt.Printf("%-9d %14s %14s %7.2fx\n", n, took.Round(time.Millisecond), base.Round(time.Millisecond), float64(took)/float64(base))
		if _, err := c.StopJob(ctx, ns, "job", "bench done"); err != nil {
			return err
		}
	}
	if err := runKubeRecovery(ctx, cluster, c, defaultEviction); err != nil {
		return err
	}
	return runKubeLeaseExpiry(ctx, cluster, c, leaseRuns)
}

// plainPods creates n pods directly and waits until they all run: the floor.
func plainPods(ctx context.Context, cs kubernetes.Interface, ns string, n int) (time.Duration, error) {
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	// Pods are refused until the namespace's default service account exists.
	for {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	start := time.Now()
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "plain-" + strconv.Itoa(i), Labels: map[string]string{"bench": "plain"}},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{{Name: "main", Image: "registry.local/train:1.4", Command: []string{"train"}}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return 0, err
		}
	}
	if err := waitRunning(ctx, cs, ns, "bench=plain", n); err != nil {
		return 0, err
	}
	return time.Since(start), nil
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
