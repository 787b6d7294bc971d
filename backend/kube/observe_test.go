package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

func TestReplicaStatus(t *testing.T) {
	r := replicaRef{Name: "j-worker-0-a1", Role: "worker", Index: 0}
	base := schemas.ReplicaStatus{Name: r.Name, Role: "worker", Index: 0}
	with := func(f func(*schemas.ReplicaStatus)) schemas.ReplicaStatus {
		s := base
		f(&s)
		return s
	}
	// failed is a replica whose container exited with code after running from t0 to t1.
	failed := func(code int32, message string, reason schemas.FailureClass) schemas.ReplicaStatus {
		return with(func(s *schemas.ReplicaStatus) {
			s.Phase, s.Node, s.ExitCode, s.Message, s.Reason = schemas.ReplicaFailed, "node-1", ptr(code), message, reason
			s.StartTime, s.FinishTime = timeP(t0), timeP(t1)
		})
	}
	pod := func(phase corev1.PodPhase, f func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-1"}, Status: corev1.PodStatus{Phase: phase}}
		if f != nil {
			f(p)
		}
		return p
	}
	terminated := func(code int32, reason string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason, StartedAt: t0, FinishedAt: t1},
			}}}
		}
	}
	running := func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: t0},
		}}}
	}
	waiting := func(reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg},
			}}}
		}
	}
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &t1 }
	// disrupted is a running pod being deleted with a DisruptionTarget condition.
	disrupted := func(reason, msg string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			running(p)
			deleting(p)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
				Reason: reason, Message: msg}}
		}
	}
	launched := gangRecord{launched: true}
	stopped := gangRecord{launched: true, stopped: true}

	tests := map[string]struct {
		pod  *corev1.Pod
		gang gangRecord
		want schemas.ReplicaStatus
	}{
		"not created yet": {
			want: with(func(s *schemas.ReplicaStatus) { s.Phase, s.Message = schemas.ReplicaPending, MessageNotCreated }),
		},
		"vanished after launch": {
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Message, s.Reason = schemas.ReplicaFailed, MessagePodDeleted, schemas.FailurePodDeleted
			}),
		},
		"gone after stop": {
			gang: stopped,
			want: with(func(s *schemas.ReplicaStatus) { s.Phase, s.Message = schemas.ReplicaStopped, MessageStopped }),
		},
		"stopped before launch finished": {
			gang: gangRecord{stopped: true},
			want: with(func(s *schemas.ReplicaStatus) { s.Phase, s.Message = schemas.ReplicaStopped, MessageStoppedBeforeStart }),
		},
		"unschedulable": {
			pod: pod(corev1.PodPending, func(p *corev1.Pod) {
				p.Spec.NodeName = ""
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
					Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."}}
			}),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Message = schemas.ReplicaPending, "Unschedulable: 0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
			}),
		},
		"not scheduled yet": {
			pod:  pod(corev1.PodPending, func(p *corev1.Pod) { p.Spec.NodeName = "" }),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) { s.Phase, s.Message = schemas.ReplicaPending, "waiting to be scheduled" }),
		},
		"image pull back-off": { // may resolve: Observe's pull grace decides (transient_test.go)
			pod:  pod(corev1.PodPending, waiting("ImagePullBackOff", `Back-off pulling image "x"`)),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.Message = schemas.ReplicaPending, "node-1", `ImagePullBackOff: Back-off pulling image "x"`
			}),
		},
		"invalid image name": {
			pod:  pod(corev1.PodPending, waiting("InvalidImageName", "bad")),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.Message, s.Reason = schemas.ReplicaFailed, "node-1", "InvalidImageName: bad", schemas.FailureImagePull
			}),
		},
		"running": {
			pod:  pod(corev1.PodRunning, running),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.StartTime = schemas.ReplicaRunning, "node-1", timeP(t0)
			}),
		},
		"succeeded": {
			pod:  pod(corev1.PodSucceeded, terminated(0, "Completed")),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.ExitCode, s.StartTime, s.FinishTime = schemas.ReplicaSucceeded, "node-1", ptr[int32](0), timeP(t0), timeP(t1)
			}),
		},
		"succeeded without container status (kwok)": {
			pod:  pod(corev1.PodSucceeded, func(p *corev1.Pod) { p.Status.StartTime = &t0 }),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.ExitCode, s.StartTime = schemas.ReplicaSucceeded, "node-1", ptr[int32](0), timeP(t0)
			}),
		},
		"failed with exit code": {
			pod:  pod(corev1.PodFailed, terminated(137, "OOMKilled")),
			gang: launched,
			want: failed(137, "OOMKilled", schemas.FailureOOMKilled),
		},
		"evicted": {
			pod: pod(corev1.PodFailed, func(p *corev1.Pod) {
				p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: t1}}
			}),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.Message, s.FinishTime = schemas.ReplicaFailed, "node-1", "Evicted: The node was low on resource: memory.", timeP(t1)
				s.Reason = schemas.FailureEvicted
			}),
		},
		"deleted by the taint manager": {
			pod:  pod(corev1.PodRunning, disrupted("DeletionByTaintManager", "Taint manager: deleting due to NoExecute taint")),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.StartTime = schemas.ReplicaFailed, "node-1", timeP(t0)
				s.Message = "pod is being deleted: DeletionByTaintManager: Taint manager: deleting due to NoExecute taint"
				s.Reason = schemas.FailureNodeLost
			}),
		},
		"being stopped": {
			pod:  pod(corev1.PodRunning, func(p *corev1.Pod) { running(p); deleting(p) }),
			gang: stopped,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.StartTime, s.Message = schemas.ReplicaStopped, "node-1", timeP(t0), MessageStopped
			}),
		},
		"killed by stop": {
			pod:  pod(corev1.PodFailed, func(p *corev1.Pod) { terminated(143, "Error")(p); deleting(p) }),
			gang: stopped,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.Message = schemas.ReplicaStopped, "node-1", MessageStopped
				s.StartTime, s.FinishTime = timeP(t0), timeP(t1)
			}),
		},
		"running in a stopped gang, not deleted yet": {
			pod:  pod(corev1.PodRunning, running),
			gang: stopped,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.StartTime, s.Message = schemas.ReplicaStopped, "node-1", timeP(t0), MessageStopped
			}),
		},
		"finished before stop": {
			pod:  pod(corev1.PodFailed, terminated(3, "Error")),
			gang: stopped,
			want: failed(3, "Error", schemas.FailureError),
		},
		"killed by a signal": {
			pod:  pod(corev1.PodFailed, terminated(137, "Error")),
			gang: launched,
			want: failed(137, "Error", schemas.FailureSignal),
		},
		"preempted by the scheduler": {
			pod:  pod(corev1.PodRunning, disrupted("PreemptionByScheduler", "preempted by high/urgent")),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.StartTime, s.Reason = schemas.ReplicaFailed, "node-1", timeP(t0), schemas.FailurePreempted
				s.Message = "pod is being deleted: PreemptionByScheduler: preempted by high/urgent"
			}),
		},
		"config error": {
			pod:  pod(corev1.PodPending, waiting("CreateContainerConfigError", `secret "s3" not found`)),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.Reason = schemas.ReplicaFailed, "node-1", schemas.FailureConfig
				s.Message = `CreateContainerConfigError: secret "s3" not found`
			}),
		},
		"unknown phase": {
			pod:  pod(corev1.PodUnknown, running),
			gang: launched,
			want: with(func(s *schemas.ReplicaStatus) {
				s.Phase, s.Node, s.StartTime, s.Message = schemas.ReplicaRunning, "node-1", timeP(t0), "pod phase Unknown"
			}),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := replicaStatus(r, tt.pod, tt.gang)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("replicaStatus (-want +got):\n%s", diff)
			}
		})
	}
}

func TestObserveUnknownGang(t *testing.T) {
	b := newBackend(t, newClient())
	_, err := b.Observe(context.Background(), backend.GangRef{Workspace: "vision", Job: "nope", Attempt: 1})
	if !errors.Is(err, backend.ErrGangNotFound) {
		t.Fatalf("Observe = %v, want ErrGangNotFound", err)
	}
}

func TestObserveFollowsPods(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	want := []schemas.ReplicaStatus{
		{Name: "resnet-master-0-a1", Role: "master", Index: 0, Phase: schemas.ReplicaPending, Message: "waiting to be scheduled"},
		{Name: "resnet-worker-0-a1", Role: "worker", Index: 0, Phase: schemas.ReplicaPending, Message: "waiting to be scheduled"},
		{Name: "resnet-worker-1-a1", Role: "worker", Index: 1, Phase: schemas.ReplicaPending, Message: "waiting to be scheduled"},
	}
	// Right after Launch, whatever the cache holds.
	if diff := cmp.Diff(want, observe(t, b, g.GangRef)); diff != "" {
		t.Errorf("after Launch (-want +got):\n%s", diff)
	}

	for i, name := range []string{"resnet-master-0-a1", "resnet-worker-0-a1", "resnet-worker-1-a1"} {
		st := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}}}}}
		setPodStatus(t, cs, "vision", name, st, "node-"+string(rune('a'+i)))
		want[i].Phase, want[i].Message, want[i].Node, want[i].StartTime = schemas.ReplicaRunning, "", "node-"+string(rune('a'+i)), timeP(t0)
	}
	testutil.Eventually(t, 10*time.Second, "the cache to see the pods running", func() bool {
		return cmp.Equal(want, observe(t, b, g.GangRef))
	})

	// A worker restarted: nothing in memory, nothing cached yet.
	if diff := cmp.Diff(want, observe(t, newUncachedBackend(t, cs), g.GangRef)); diff != "" {
		t.Errorf("from a new Backend (-want +got):\n%s", diff)
	}

	// Someone deletes a pod.
	if err := cs.CoreV1().Pods("vision").Delete(context.Background(), "resnet-worker-1-a1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want[2] = schemas.ReplicaStatus{Name: "resnet-worker-1-a1", Role: "worker", Index: 1, Phase: schemas.ReplicaFailed, Message: MessagePodDeleted, Reason: schemas.FailurePodDeleted, Node: "node-c"}
	testutil.Eventually(t, 10*time.Second, "the cache to lose the pod", func() bool {
		return cmp.Equal(want, observe(t, b, g.GangRef))
	})

	// The Service is deleted (the garbage collector will follow): the pods left still
	// tell the story.
	if err := cs.CoreV1().Services("vision").Delete(context.Background(), "resnet-a1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the cache to lose the service", func() bool {
		return cmp.Equal(want[:2], observe(t, b, g.GangRef))
	})
}

// Once synced, Observe reads only the cache.
func TestObserveReadsTheCache(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	waitSynced(t, b)
	testutil.Eventually(t, 10*time.Second, "the cache to hold the gang", func() bool {
		pods, ok := b.cache.cachedGangPods("vision", g.GangRef)
		return ok && len(pods) == 3
	})
	cs.ClearActions()
	for range 5 {
		observe(t, b, g.GangRef)
	}
	for _, a := range cs.Actions() {
		if a.GetVerb() != "watch" {
			t.Errorf("Observe made a %s %s request", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
