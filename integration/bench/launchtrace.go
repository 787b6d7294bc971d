package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	tclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/workflows"
)

// launchSteps splits one launch (submit or first request -> all pods Running) where
// the bench can see it from outside: when the first pod existed, when all existed,
// and when all ran. Polled every 20 ms, so each mark is late by up to one poll.
type launchSteps struct {
	firstPod, allPods, allScheduled, allIP, allRunning time.Duration
	// stopped is how long the stop took to answer (OpenDLC: `dlc job stop`; client-go:
	// the namespace's deletion), and gone until no pod of the run was left; not part
	// of the launch's time.
	stopped, gone time.Duration
}

// waitRunningSteps is waitRunning that also records the launchSteps, from start.
func waitRunningSteps(ctx context.Context, cs kubernetes.Interface, ns, selector string, n int, start time.Time) (launchSteps, error) {
	var s launchSteps
	for {
		l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, ResourceVersion: "0"})
		if err == nil {
			running, scheduled, withIP := 0, 0, 0
			for _, p := range l.Items {
				if p.Status.Phase == corev1.PodRunning {
					running++
				}
				if p.Spec.NodeName != "" {
					scheduled++
				}
				if p.Status.PodIP != "" {
					withIP++
				}
			}
			now := time.Since(start)
			if s.allScheduled == 0 && scheduled == n {
				s.allScheduled = now
			}
			if s.allIP == 0 && withIP == n {
				s.allIP = now
			}
			if s.firstPod == 0 && len(l.Items) > 0 {
				s.firstPod = now
			}
			if s.allPods == 0 && len(l.Items) == n {
				s.allPods = now
			}
			if running == n {
				s.allRunning = now
				return s, nil
			}
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("pods of %s (%s) not all running: %w", ns, selector, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// printSteps prints the medians of the steps of one side's runs.
func printSteps(side string, steps []launchSteps) {
	pick := func(f func(launchSteps) time.Duration) time.Duration {
		d := make([]time.Duration, len(steps))
		for i, s := range steps {
			d[i] = f(s)
		}
		return median(d)
	}
	fmt.Printf("    %-10s median: first pod exists %s, all pods exist %s, all scheduled %s, all have an IP %s, all Running %s\n", side,
		pick(func(s launchSteps) time.Duration { return s.firstPod }), pick(func(s launchSteps) time.Duration { return s.allPods }),
		pick(func(s launchSteps) time.Duration { return s.allScheduled }), pick(func(s launchSteps) time.Duration { return s.allIP }),
		pick(func(s launchSteps) time.Duration { return s.allRunning }))
	fmt.Printf("    %-10s median: stop answered %s, all pods gone %s\n", side,
		pick(func(s launchSteps) time.Duration { return s.stopped }), pick(func(s launchSteps) time.Duration { return s.gone }))
}

// printJobHistory prints the activities of job's workflow in workspace ws and when each
// was scheduled, started and closed, relative to submit: where the launch's time went
// on the Temporal side.
func printJobHistory(ctx context.Context, temporalAddr, ws, job string, submit time.Time) error {
	tc, err := tclient.Dial(tclient.Options{HostPort: temporalAddr, Logger: nopLogger{}})
	if err != nil {
		return err
	}
	defer tc.Close()
	type act struct {
		name                      string
		scheduled, started, ended time.Duration
	}
	var acts []*act
	byID := map[int64]*act{}
	var events, bytes int
	var taskFailures []string
	it := tc.GetWorkflowHistory(ctx, workflows.JobWorkflowID(ws, job), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	fmt.Printf("    history of %s/%s (ms after submit):", ws, job)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		at := ev.GetEventTime().AsTime().Sub(submit)
		events++
		bytes += proto.Size(ev)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED:
			a := ev.GetWorkflowTaskFailedEventAttributes()
			taskFailures = append(taskFailures, fmt.Sprintf("%d ms: workflow task failed (%s): %s", at.Milliseconds(), a.GetCause(), a.GetFailure().GetMessage()))
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			taskFailures = append(taskFailures, fmt.Sprintf("%d ms: workflow task timed out (%s)", at.Milliseconds(), ev.GetWorkflowTaskTimedOutEventAttributes().GetTimeoutType()))
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			fmt.Printf(" started %d;", at.Milliseconds())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
			fmt.Printf(" wft scheduled %d", at.Milliseconds())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			fmt.Printf(" started %d", at.Milliseconds())
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			fmt.Printf(" completed %d;", at.Milliseconds())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a := &act{name: ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName(), scheduled: at, started: -1, ended: -1}
			acts = append(acts, a)
			byID[ev.GetEventId()] = a
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if a := byID[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; a != nil {
				a.started = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if a := byID[ev.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; a != nil {
				a.ended = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED:
			if a := byID[ev.GetActivityTaskFailedEventAttributes().GetScheduledEventId()]; a != nil {
				a.ended = at
			}
		}
	}
	fmt.Printf(" %d events, %d bytes\n", events, bytes)
	for _, f := range taskFailures {
		fmt.Printf("      %s\n", f)
	}
	slices.SortStableFunc(acts, func(a, b *act) int { return int(a.scheduled - b.scheduled) })
	for _, a := range acts {
		fmt.Printf("      %-28s scheduled %6d  started %6d  closed %6d\n", a.name, a.scheduled.Milliseconds(), a.started.Milliseconds(), a.ended.Milliseconds())
	}
	return nil
}

// startCPUProfile profiles this process's CPU into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
