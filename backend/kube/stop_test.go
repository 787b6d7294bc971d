package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

func runningStatus() corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}}}}}
}

func failedStatus(code int32) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error", StartedAt: t0, FinishedAt: t1}}}}}
}

// deletes returns the pod deletions cs received, by pod name, with their grace periods.
func deletes(cs *fake.Clientset) map[string][]int64 {
	out := map[string][]int64{}
	for _, a := range cs.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "pods" {
			g := int64(-1)
			if p := d.GetDeleteOptions().GracePeriodSeconds; p != nil {
				g = *p
			}
			out[d.GetName()] = append(out[d.GetName()], g)
		}
	}
	return out
}

func TestStopKillsWhatRunsAndKeepsWhatFinished(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs, WithStopGracePeriod(20*time.Second))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", failedStatus(3), "node-b")
	setPodStatus(t, cs, "vision", "resnet-worker-1-a1", runningStatus(), "node-c")
	cs.ClearActions()

	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if diff := cmp.Diff(map[string][]int64{"resnet-master-0-a1": {20}, "resnet-worker-1-a1": {20}}, deletes(cs)); diff != "" {
		t.Errorf("deletions (-want +got):\n%s", diff)
	}
	left := pods(t, cs, "vision")
	if _, ok := left["resnet-worker-0-a1"]; !ok || len(left) != 1 {
		t.Errorf("pods left: %v, want only the finished one", left)
	}
	svc, err := cs.CoreV1().Services("vision").Get(context.Background(), "resnet-a1", metav1.GetOptions{})
	if err != nil || svc.Annotations[AnnotationStopped] != "true" {
		t.Fatalf("service %v (%v): not marked stopped", svc.Annotations, err)
	}

	want := []schemas.ReplicaStatus{
		{Name: "resnet-master-0-a1", Role: "master", Phase: schemas.ReplicaStopped, Message: MessageStopped},
		{Name: "resnet-worker-0-a1", Role: "worker", Phase: schemas.ReplicaFailed, ExitCode: ptr[int32](3), Node: "node-b", Message: "Error", Reason: schemas.FailureError,
			StartTime: timeP(t0), FinishTime: timeP(t1)},
		{Name: "resnet-worker-1-a1", Role: "worker", Index: 1, Phase: schemas.ReplicaStopped, Message: MessageStopped},
	}
	// At once from this Backend (it remembers), eventually from its cache, and from a
	// restarted worker (the Service remembers).
	if diff := cmp.Diff(want, observe(t, b, g.GangRef)); diff != "" {
		t.Errorf("after Stop (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, observe(t, newUncachedBackend(t, cs), g.GangRef)); diff != "" {
		t.Errorf("from a new Backend (-want +got):\n%s", diff)
	}

	// Stop again: nothing to do.
	cs.ClearActions()
	if err := b.Stop(context.Background(), g.GangRef); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if d := deletes(cs); len(d) != 0 {
		t.Errorf("second Stop deleted %v", d)
	}
}

func TestStopUnknownGang(t *testing.T) {
	b := newBackend(t, newClient())
	if err := b.Stop(context.Background(), backend.GangRef{Workspace: "w", Job: "nope", Attempt: 1}); err != nil {
		t.Fatalf("Stop: %v", err)
	}
}

// stickyDeletes makes pod deletions with a grace period only mark the pod deleting, as
// when its node is down and no kubelet confirms the kill; deletions with no grace
// remove it.
func stickyDeletes(cs *fake.Clientset) {
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d := a.(k8stesting.DeleteAction)
		if g := d.GetDeleteOptions().GracePeriodSeconds; g != nil && *g == 0 {
			return false, nil, nil
		}
		obj, err := cs.Tracker().Get(pods, d.GetNamespace(), d.GetName())
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod)
		if p.DeletionTimestamp == nil {
			p.DeletionTimestamp = &t1
			return true, nil, cs.Tracker().Update(pods, p, d.GetNamespace())
		}
		return true, nil, nil
	})
}

func TestStopForcesPodsNobodyKills(t *testing.T) {
	cs := newClient()
	clk := clocktesting.NewFakeClock(time.Now())
	b := newBackend(t, cs, WithClock(clk), WithStopGracePeriod(10*time.Second))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", runningStatus(), "node-a")
	stickyDeletes(cs)
	cs.ClearActions()

	done := make(chan error, 1)
	go func() { done <- b.Stop(context.Background(), g.GangRef) }()
	var stopErr error
	testutil.Eventually(t, 10*time.Second, "Stop to return", func() bool {
		select {
		case stopErr = <-done:
			return true
		default:
		}
		if clk.HasWaiters() {
			clk.Step(time.Second)
		}
		return false
	}, time.Millisecond)
	if stopErr != nil {
		t.Fatalf("Stop: %v", stopErr)
	}
	if diff := cmp.Diff(map[string][]int64{
		"resnet-master-0-a1": {10, 0}, "resnet-worker-0-a1": {10, 0}, "resnet-worker-1-a1": {10, 0},
	}, deletes(cs)); diff != "" {
		t.Errorf("deletions (-want +got):\n%s", diff)
	}
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods left", n)
	}
}

func TestStopGivesUpWithItsContext(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	stickyDeletes(cs)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := b.Stop(ctx, g.GangRef); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want the context's error", err)
	}
	// The replicas are Stopped all the same: the mark was set first.
	for _, r := range observe(t, b, g.GangRef) {
		if r.Phase != schemas.ReplicaStopped {
			t.Errorf("%s is %s, want Stopped", r.Name, r.Phase)
		}
	}
}

func TestCleanup(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	setPodStatus(t, cs, "vision", "resnet-worker-0-a1", failedStatus(1), "node-b")
	cs.ClearActions()
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	var policy []metav1.DeletionPropagation
	for _, a := range cs.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && a.GetResource().Resource == "services" {
			if p := d.GetDeleteOptions().PropagationPolicy; p != nil {
				policy = append(policy, *p)
			}
		}
	}
	if diff := cmp.Diff([]metav1.DeletionPropagation{metav1.DeletePropagationBackground}, policy); diff != "" {
		t.Errorf("service deletion policy (-want +got):\n%s", diff)
	}
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods left", n)
	}
	if _, err := cs.CoreV1().Services("vision").Get(context.Background(), "resnet-a1", metav1.GetOptions{}); err == nil {
		t.Error("service left")
	}
	testutil.Eventually(t, 10*time.Second, "the gang to be unknown", func() bool {
		_, err := b.Observe(context.Background(), g.GangRef)
		return errors.Is(err, backend.ErrGangNotFound)
	})
	if err := b.Cleanup(context.Background(), g.GangRef); err != nil {
		t.Fatalf("second Cleanup: %v", err)
	}
	// The namespace is the workspace's: it stays.
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "vision", metav1.GetOptions{}); err != nil {
		t.Errorf("namespace: %v", err)
	}
}
