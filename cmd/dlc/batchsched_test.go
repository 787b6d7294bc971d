package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
)

func TestBatchFlags(t *testing.T) {
	f := batchFlags{
		GangScheduler: []string{"spot=volcano", "public=coscheduling", "quota=kueue"},
		SchedulerName: []string{"public=my-coscheduler"},
		Queue:         []string{"spot=research", "quota=team-a"},
	}
	got, err := f.configs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[schemas.Pool]*kube.BatchScheduling{
		schemas.PoolSpot:   {Scheduler: kube.GangSchedulerVolcano, Queue: "research"},
		schemas.PoolPublic: {Scheduler: kube.GangSchedulerCoscheduling, SchedulerName: "my-coscheduler"},
		schemas.PoolQuota:  {Scheduler: kube.GangSchedulerKueue, Queue: "team-a"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
	opts, err := f.options()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 3 {
		t.Errorf("%d options, want 3", len(opts))
	}
	// Coscheduling and Volcano need a dynamic client, which the worker gives
	// (app.NewKubeBackend); without one New says so.
	if _, err := kube.New(fake.NewClientset(), opts...); err == nil || !strings.Contains(err.Error(), "dynamic client") {
		t.Errorf("New without a dynamic client: %v", err)
	}

	for name, bad := range map[string]struct {
		f    batchFlags
		want string
	}{
		"unknown pool":      {batchFlags{GangScheduler: []string{"cheap=volcano"}}, "pool must be one of"},
		"unknown scheduler": {batchFlags{GangScheduler: []string{"spot=slurm"}}, "want opendlc, coscheduling, volcano or kueue"},
		"no value":          {batchFlags{Queue: []string{"spot"}}, "want POOL=VALUE"},
	} {
		_, err := bad.f.configs()
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %q", name, err, bad.want)
		}
	}
	// Settings the backend refuses surface when the options apply.
	kueueNoQueue := batchFlags{GangScheduler: []string{"quota=kueue"}}
	opts, err = kueueNoQueue.options()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.New(fake.NewClientset(), opts...); err == nil || !strings.Contains(err.Error(), "pool quota: kueue needs a queue") {
		t.Errorf("kueue without a queue: %v", err)
	}
}
