package activities_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// plainBackend is a Backend that cannot check nodes, as the local backend.
type plainBackend struct{ backend.Backend }

// checkingBackend records what CheckNodes and RecheckQuarantined were asked.
type checkingBackend struct {
	plainBackend
	in           backend.CheckNodesInput
	probeTimeout time.Duration
	recheck      []backend.NodeHealth
}

func (b *checkingBackend) CheckNodes(_ context.Context, in backend.CheckNodesInput) (backend.CheckNodesResult, error) {
	b.in = in
	return backend.CheckNodesResult{Nodes: []backend.NodeHealth{{Node: "n1", Healthy: true}}}, nil
}

func (b *checkingBackend) RecheckQuarantined(_ context.Context, probeTimeout time.Duration) ([]backend.NodeHealth, error) {
	b.probeTimeout = probeTimeout
	return b.recheck, nil
}

func runActivity[T any](t *testing.T, fn any, in any) T {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(fn)
	v, err := env.ExecuteActivity(fn, in)
	if err != nil {
		t.Fatalf("activity: %v", err)
	}
	var out T
	if err := v.Get(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Without a NodeChecker (the local backend) the check reports the local host healthy,
// unless the workflow excludes it.
func TestCheckNodesWithoutNodeCheckerReportsTheLocalHost(t *testing.T) {
	a := &activities.JobActivities{Backend: plainBackend{}}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	job := *schemastest.Job("j").Obj()
	got := runActivity[backend.CheckNodesResult](t, a.CheckNodes, backend.CheckNodesInput{Job: job})
	if len(got.Nodes) != 1 || got.Nodes[0].Node != host || !got.Nodes[0].Healthy || got.Nodes[0].Reason != backend.ReasonNotChecked ||
		len(got.Quarantined) != 0 || len(got.Unhealthy()) != 0 {
		t.Errorf("result %+v, want %s healthy", got, host)
	}
	got = runActivity[backend.CheckNodesResult](t, a.CheckNodes, backend.CheckNodesInput{Job: job, Exclude: []string{host}})
	if len(got.Nodes) != 0 {
		t.Errorf("excluded host reported: %+v", got)
	}
	rc := runActivity[activities.RecheckQuarantinedResult](t, a.RecheckQuarantined, activities.RecheckQuarantinedInput{})
	if len(rc.Nodes) != 0 || len(rc.Released) != 0 {
		t.Errorf("recheck without a NodeChecker: %+v", rc)
	}
}

// The check's timeout is the caller's, else the spec's, else the default.
func TestCheckNodesTimeoutDefaults(t *testing.T) {
	tests := map[string]struct {
		in   time.Duration
		spec time.Duration
		want time.Duration
	}{
		"the caller's":    {in: time.Minute, spec: 3 * time.Minute, want: time.Minute},
		"the spec's":      {spec: 3 * time.Minute, want: 3 * time.Minute},
		"the default one": {want: backend.DefaultHealthCheckTimeout},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := &checkingBackend{}
			a := &activities.JobActivities{Backend: b}
			job := schemastest.Job("j")
			if tt.spec > 0 {
				job.HealthCheck(tt.spec)
			}
			in := backend.CheckNodesInput{Ref: backend.GangRef{Workspace: "ws", Job: "j", Attempt: 1}, Job: *job.Obj(),
				Pool: schemas.PoolPublic, Exclude: []string{"n0"}, Timeout: tt.in}
			got := runActivity[backend.CheckNodesResult](t, a.CheckNodes, in)
			if len(got.Nodes) != 1 || got.Nodes[0].Node != "n1" {
				t.Errorf("result %+v", got)
			}
			if b.in.Timeout != tt.want || b.in.Ref != in.Ref || b.in.Pool != schemas.PoolPublic || !cmp.Equal(b.in.Exclude, []string{"n0"}) {
				t.Errorf("backend asked %+v, want timeout %s", b.in, tt.want)
			}
		})
	}
}

// RecheckQuarantined sorts what the backend re-checked and lists the released nodes.
func TestRecheckQuarantinedListsReleasedNodes(t *testing.T) {
	b := &checkingBackend{recheck: []backend.NodeHealth{
		{Node: "c", Healthy: true}, {Node: "a", Reason: backend.ReasonProbeFailed, Quarantined: true}, {Node: "b", Healthy: true},
	}}
	a := &activities.JobActivities{Backend: b}
	got := runActivity[activities.RecheckQuarantinedResult](t, a.RecheckQuarantined, activities.RecheckQuarantinedInput{})
	var order []string
	for _, n := range got.Nodes {
		order = append(order, n.Node)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, got.Released); diff != "" {
		t.Errorf("released (-want +got):\n%s", diff)
	}
	if b.probeTimeout != backend.DefaultProbeTimeout {
		t.Errorf("probe timeout %s, want the default", b.probeTimeout)
	}
}
