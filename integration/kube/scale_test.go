package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// testHeartbeatBudget is the tests' worker's --heartbeat-budget: small, so that a
// couple of dozen jobs are past it and the pacing shows.
const testHeartbeatBudget = 10

// workerFlowSchema classifies the worker's requests (its service account) to the API
// server's priority and fairness, so apiserver_flowcontrol_dispatched_requests_total
// counts exactly the worker's requests, none of kwok's or the controllers'. Log
// streams are long-running requests, which priority and fairness does not see.
const workerFlowSchema = "opendlc-worker-scale-test"

// TestScaleWatchCostGrowsSubLinearly is the reduced CI size of task bench:scale: it
// runs 5, then 25 two-pod jobs at once on the worker, and measures what watching them
// costs while they run: the worker's requests to the API server (counted by the API
// server) and its heartbeats to Temporal (counted by the worker's own metrics) over
// the same window. Going from 5 to 25 jobs must not multiply either by five: the
// jobs share the worker's informers, and its heartbeat budget spreads over them. Then
// every job is stopped and must end Stopped with its pods gone.
func TestScaleWatchCostGrowsSubLinearly(t *testing.T) {
	ctx := itest10m(t)
	const ws = "kube-scale"
	createWorkerFlowSchema(t, ctx)

	before := workerRequests(t, ctx)
	submitScaleJobs(t, ctx, ws, 0, 5)
	waitScaleRunning(t, ctx, ws, 5)
	if workerRequests(t, ctx) <= before {
		t.Fatal("the API server counted no request of the worker while it launched 5 jobs: the flow schema does not match the worker")
	}
	small := measureWatchCost(t, ctx)

	submitScaleJobs(t, ctx, ws, 5, 25)
	waitScaleRunning(t, ctx, ws, 25)
	large := measureWatchCost(t, ctx)
	t.Logf("watching 5 jobs: %d API requests, %.0f heartbeats in %s; 25 jobs: %d API requests, %.0f heartbeats",
		small.requests, small.heartbeats, scaleWindow, large.requests, large.heartbeats)

	if small.heartbeats <= 0 {
		t.Fatalf("no heartbeat counted while 5 jobs ran (%+v): the measure is broken", small)
	}
	// Linear growth would be 5x; the budget keeps it near 1x. 2.5x leaves room for the
	// jitter of two windows on a loaded machine.
	if large.heartbeats > 2.5*small.heartbeats {
		t.Errorf("heartbeats grew from %.0f to %.0f per %s going from 5 to 25 jobs: not sub-linear", small.heartbeats, large.heartbeats, scaleWindow)
	}
	if large.requests > 2*small.requests+20 {
		t.Errorf("the worker's API requests grew from %d to %d per %s going from 5 to 25 jobs: not sub-linear", small.requests, large.requests, scaleWindow)
	}

	stopScaleJobs(t, ctx, ws, 25)
	for i := range 25 {
		waitJob(t, ctx, ws, scaleJobName(i), "Stopped", func(j *api.Job) bool { return j.Status.Phase == schemas.JobStopped })
	}
	testutil.Eventually(t, itest.Left(ctx), "every pod of the scale jobs gone", func() bool {
		l, err := env.cluster.Client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: "opendlc.io/workspace=" + ws})
		return err == nil && len(l.Items) == 0
	}, itest.PollInterval)
}

// scaleWindow is how long each cost is measured.
const scaleWindow = 20 * time.Second

type watchCost struct {
	requests   int64
	heartbeats float64
}

// measureWatchCost counts the worker's API requests and heartbeats over scaleWindow,
// once the launch's own requests have ended (quiesce).
func measureWatchCost(t *testing.T, ctx context.Context) watchCost {
	t.Helper()
	quiesce(t, ctx)
	r0, h0 := workerRequests(t, ctx), workerHeartbeats(t, ctx)
	settle(ctx, scaleWindow)
	return watchCost{requests: workerRequests(t, ctx) - r0, heartbeats: workerHeartbeats(t, ctx) - h0}
}

// quiesce polls, once a second, until the worker's API request count stops moving: the
// launch's own requests have ended. Past a minute it measures anyway, and says so.
func quiesce(t *testing.T, ctx context.Context) {
	t.Helper()
	prev := workerRequests(t, ctx)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		settle(ctx, time.Second) // the poll's interval
		cur := workerRequests(t, ctx)
		if cur == prev {
			return
		}
		prev = cur
	}
	t.Logf("the worker's requests still moved after a minute; measuring anyway")
}

// settle lets d pass: a measuring window, not a wait for a condition.
func settle(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func scaleJobName(i int) string { return fmt.Sprintf("scale-%02d", i) }

// submitScaleJobs submits jobs from..to-1, two replicas each, 8 at a time.
func submitScaleJobs(t *testing.T, ctx context.Context, ws string, from, to int) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, to-from)
	for i := from; i < to; i++ {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":%q,"workspace":%q},
"spec":{"framework":"pytorch","image":"registry.local/train:1.4","command":["train"],"roles":{"worker":{"replicas":2}}}}`, scaleJobName(i), ws)
			if _, err := env.api.SubmitJob(ctx, []byte(spec)); err != nil {
				errs <- fmt.Errorf("submit %s: %w", scaleJobName(i), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// stopScaleJobs stops jobs 0..n-1, all at once: a stop call returns once its job has
// ended, which takes up to a paced heartbeat interval (the watch sees the cancellation
// at its next heartbeat), so one stop after the other would add those intervals up.
func stopScaleJobs(t *testing.T, ctx context.Context, ws string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			if _, err := env.api.StopJob(ctx, ws, scaleJobName(i), "scale test done"); err != nil {
				errs <- fmt.Errorf("stop %s: %w", scaleJobName(i), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// waitScaleRunning waits until jobs 0..n-1 all run.
func waitScaleRunning(t *testing.T, ctx context.Context, ws string, n int) {
	t.Helper()
	for i := range n {
		waitJob(t, ctx, ws, scaleJobName(i), "Running", func(j *api.Job) bool { return j.Status.Phase == schemas.JobRunning })
	}
}

// createWorkerFlowSchema matches the worker's service account ahead of the built-in
// schemas, and waits until the API server uses it.
func createWorkerFlowSchema(t *testing.T, ctx context.Context) {
	t.Helper()
	fs := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: workerFlowSchema},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "global-default"},
			MatchingPrecedence:         100,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "opendlc-system", Name: "opendlc-worker"}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
					Namespaces: []string{"*"}, ClusterScope: true}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
	}
	_, err := env.cluster.Client.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testutil.Eventually(t, itest.Left(ctx), "the API server uses the worker's flow schema", func() bool {
		got, err := env.cluster.Client.FlowcontrolV1().FlowSchemas().Get(ctx, workerFlowSchema, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range got.Status.Conditions {
			if c.Type == flowcontrolv1.FlowSchemaConditionDangling {
				return c.Status == flowcontrolv1.ConditionFalse
			}
		}
		return false
	}, itest.PollInterval)
}

// workerRequests is how many of the worker's requests the API server has dispatched.
func workerRequests(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	body, err := env.cluster.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("API server metrics: %v", err)
	}
	return int64(sumMetric(strings.NewReader(string(body)), "apiserver_flowcontrol_dispatched_requests_total", `flow_schema="`+workerFlowSchema+`"`))
}

// workerHeartbeats is how many heartbeats the worker has sent to Temporal.
func workerHeartbeats(t *testing.T, ctx context.Context) float64 {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+env.workerMetrics+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("worker metrics: %v", err)
	}
	defer resp.Body.Close()
	return sumMetric(resp.Body, "temporal_request_total", `operation="RecordActivityTaskHeartbeat"`)
}

// sumMetric adds the samples of a Prometheus text-format metric whose labels contain
// match.
func sumMetric(r io.Reader, name, match string) float64 {
	var sum float64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, match) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// itest10m is a context of ten minutes that ends with the test.
func itest10m(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// freeAddr is a loopback address with a port free now, for the worker's metrics.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
