package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schedule"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Every workflow the API starts for a member, and every child those start (a trial
// job, a pipeline step's job, a schedule's run), is listed under the member's token
// name: DlcOwner (issue 37), and so is the run of a trigger the member applied. The
// workspace's quota workflow is the system's.
func TestWorkflowsListedUnderOwner(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	ensureWorkspace(t, ctx, ws)
	const owner = "owner-member"
	member := tokenClient(t, ctx, owner, ws, api.RoleMember, time.Hour)

	if _, err := member.SubmitJob(ctx, []byte(itest.ShellJob(ws, "ojob", "true"))); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if _, err := member.CreateExperiment(ctx, experimentDoc(ws, "oexp", "echo accuracy=1")); err != nil {
		t.Fatalf("experiment: %v", err)
	}
	if _, err := member.RunPipeline(ctx, pipelineDoc(ws, "opipe", 0), nil); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	if _, err := member.CreateSchedule(ctx, scheduleDoc(ws, "osched", "@every 1h", "")); err != nil {
		t.Fatalf("schedule: %v", err)
	}
	if _, err := member.TriggerSchedule(ctx, ws, "osched", schedule.AllowAll); err != nil {
		t.Fatalf("trigger schedule: %v", err)
	}
	// A trigger the member applies: the server records the member as its owner (a
	// forged owner in the document is replaced), and the run an event starts is theirs.
	if _, err := member.ApplyTrigger(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: otrig, workspace: %[1]s, annotations: {%[2]s: someone-else}}
spec:
  subject: dlc.%[1]s.trigger.otrig
  action:
    job:
      framework: custom
      command: [sh, -c, 'true']
      roles: {worker: {replicas: 1}}
`, ws, schemas.AnnotationOwner)); err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	if tr, err := member.GetTrigger(ctx, ws, "otrig"); err != nil || tr.Metadata.Annotations[schemas.AnnotationOwner] != owner {
		t.Fatalf("the stored trigger's owner: %v (%v), want %s", tr, err, owner)
	}
	ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "o-1", "source": "/etl", "type": "com.example.done",
		"datacontenttype": "application/json", "data": map[string]string{}})
	if _, err := env.events.JetStream().Publish(ctx, "dlc."+ws+".trigger.otrig", ev); err != nil {
		t.Fatal(err)
	}

	// The four objects and at least four jobs: the job, the trial, the step and the run.
	want := []string{
		workflows.JobWorkflowID(ws, "ojob"), workflows.ExperimentWorkflowID(ws, "oexp"),
		workflows.PipelineWorkflowID(ws, "opipe"), workflows.ScheduleWorkflowID(ws, "osched"),
		workflows.JobWorkflowID(ws, schemas.StepJobName("opipe", "work")),
		workflows.JobWorkflowID(ws, schemas.TriggerRunName("otrig", "/etl o-1")),
	}
	all := fmt.Sprintf("%s = '%s'", workflows.SearchAttrWorkspace, ws)
	var owners map[string]string
	testutil.Eventually(t, 2*time.Minute, "every workflow of "+ws+" listed under "+owner, func() error {
		var kinds map[string]string
		owners, kinds = listWorkflows(t, ctx, all)
		var missing, others []string
		for _, id := range want {
			if _, ok := owners[id]; !ok {
				missing = append(missing, id)
			}
		}
		jobs := 0
		for id, o := range owners {
			if id == workflows.QuotaWorkflowID(ws) {
				continue // the workspace's quota workflow: the system's, no one's
			}
			if o != owner {
				others = append(others, id+" ("+o+")")
			}
			if kinds[id] == string(schemas.KindTrainingJob) {
				jobs++
			}
		}
		if len(missing) != 0 || len(others) != 0 || jobs < 4 {
			return fmt.Errorf("workflows %v; missing %v; not %s's: %v; %d jobs (want 4: the job, the trial, the step, the run)",
				owners, missing, owner, others, jobs)
		}
		return nil
	}, time.Second)
	// Temporal's own query finds them too.
	byOwner, _ := listWorkflows(t, ctx, fmt.Sprintf("%s = '%s' AND %s", workflows.SearchAttrOwner, owner, all))
	for id := range owners {
		if _, ok := byOwner[id]; !ok && id != workflows.QuotaWorkflowID(ws) {
			t.Errorf("DlcOwner = '%s' does not list %s", owner, id)
		}
	}
}

// listWorkflows lists the workflows a visibility query matches: their DlcOwner and
// DlcKind by id.
func listWorkflows(t *testing.T, ctx context.Context, query string) (owners, kinds map[string]string) {
	t.Helper()
	owners, kinds = map[string]string{}, map[string]string{}
	dc := converter.GetDefaultDataConverter()
	var token []byte
	for {
		resp, err := env.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token})
		if err != nil {
			t.Fatalf("list %q: %v", query, err)
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			fields := e.GetSearchAttributes().GetIndexedFields()
			var owner, kind string
			_ = dc.FromPayload(fields[workflows.SearchAttrOwner], &owner)
			_ = dc.FromPayload(fields[workflows.SearchAttrKind], &kind)
			owners[id], kinds[id] = owner, kind
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return owners, kinds
		}
	}
}

// searchAttrRow is a row of docs/production.md's search attribute table.
var searchAttrRow = regexp.MustCompile("^\\| `(Dlc[A-Za-z]+)` \\| ([A-Za-z]+) \\|")

// documentedSearchAttributes reads docs/production.md's search attribute table.
func documentedSearchAttributes(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(itest.Root(), "docs", "production.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := searchAttrRow.FindStringSubmatch(sc.Text()); m != nil {
			out[m[1]] = m[2]
		}
	}
	if len(out) == 0 {
		t.Fatal("docs/production.md has no search attribute table")
	}
	return out
}

// The search attribute table of docs/production.md is what the stack registers
// (devstack.SearchAttributes, and the server's namespace), and a job the API started
// has each attribute set.
func TestSearchAttributeTable(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	doc := documentedSearchAttributes(t)
	registered := map[string]string{}
	for name, typ := range devstack.SearchAttributes {
		registered[name] = typ.String()
	}
	if !maps.Equal(doc, registered) {
		t.Errorf("docs/production.md's table %v, devstack.SearchAttributes %v", doc, registered)
	}
	// What the running server's namespace has.
	resp, err := env.temporal.OperatorService().ListSearchAttributes(ctx,
		&operatorservice.ListSearchAttributesRequest{Namespace: env.e.Stack.Temporal.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	for name, typ := range doc {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got.String() != typ {
			t.Errorf("the server has %s as %v (registered %v), the table says %s", name, got, ok, typ)
		}
	}

	// A job (with labels, on a framework) has every attribute set.
	ws := workspace(t)
	ensureWorkspace(t, ctx, ws)
	owner := "attrs-member"
	member := tokenClient(t, ctx, owner, ws, api.RoleMember, time.Hour)
	spec := itest.JobDoc("attrs", ws, `
  framework: custom
  command: [sh, -c, "true"]
  roles: {worker: {replicas: 1}}
`)
	spec = regexp.MustCompile(`metadata: \{name: attrs, workspace: ([a-z0-9-]+)\}`).ReplaceAllString(spec,
		"metadata: {name: attrs, workspace: $1, labels: {team: vision}}")
	if _, err := member.SubmitJob(ctx, []byte(spec)); err != nil {
		t.Fatalf("submit: %v", err)
	}
	desc, err := env.temporal.DescribeWorkflowExecution(ctx, workflows.JobWorkflowID(ws, "attrs"), "")
	if err != nil {
		t.Fatal(err)
	}
	set := desc.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()
	for name := range doc {
		if _, ok := set[name]; !ok {
			t.Errorf("the job's workflow has no %s (it has %v)", name, slices.Sorted(maps.Keys(set)))
		}
	}
	var got string
	_ = converter.GetDefaultDataConverter().FromPayload(set[workflows.SearchAttrOwner], &got)
	if got != owner {
		t.Errorf("DlcOwner %q, want %q", got, owner)
	}
}
