package integration

import (
	"encoding/json"
	"strings"
	"testing"

	"go.temporal.io/api/enums/v1"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// A job reads its workspace's registry entry once, when it starts (activity
// ResolveWorkspace), and keeps the namespace and pod defaults for its life: they are in
// its history, so an edit of the workspace never moves a running job's gangs.
func TestJobReadsWorkspaceConfigOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	defaults := &schemas.PodDefaults{ServiceAccountName: "trainer", ImagePullSecrets: []string{"ngc"}}
	if _, err := env.api.CreateWorkspace(ctx, api.Workspace{Name: ws, Namespace: "team-ns", PodDefaults: defaults}); err != nil {
		t.Fatal(err)
	}
	submit(t, ctx, itest.JobDoc("configured", ws, `
  framework: custom
  command: ["true"]
  roles: {worker: {replicas: 1}}
`))
	if st := waitTerminal(t, ctx, ws, "configured").Status; st.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s: %s", st.Phase, st.Message)
	}

	var results []activities.WorkspaceConfig
	it := env.temporal.GetWorkflowHistory(ctx, workflows.JobWorkflowID(ws, "configured"), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	scheduled := map[int64]bool{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == workflows.ActivityResolveWorkspace {
			scheduled[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] {
			var cfg activities.WorkspaceConfig
			if err := json.Unmarshal(a.GetResult().GetPayloads()[0].GetData(), &cfg); err != nil {
				t.Fatal(err)
			}
			results = append(results, cfg)
		}
		// Since workspace-local-activity it is a local activity: its marker holds the
		// activity's type and result.
		if m := ev.GetMarkerRecordedEventAttributes(); m != nil && m.GetMarkerName() == "LocalActivity" {
			var data struct{ ActivityType string }
			d := m.GetDetails()
			if p := d["data"].GetPayloads(); len(p) == 0 || json.Unmarshal(p[0].GetData(), &data) != nil || data.ActivityType != workflows.ActivityResolveWorkspace {
				continue
			}
			var cfg activities.WorkspaceConfig
			if p := d["result"].GetPayloads(); len(p) == 0 || json.Unmarshal(p[0].GetData(), &cfg) != nil {
				t.Fatalf("ResolveWorkspace's marker has no result: %v", d)
			}
			results = append(results, cfg)
		}
	}
	if len(results) != 1 {
		t.Fatalf("ResolveWorkspace completed %d times, want once", len(results))
	}
	if got := results[0]; got.Namespace != "team-ns" || got.PodDefaults == nil || got.PodDefaults.ServiceAccountName != "trainer" ||
		strings.Join(got.PodDefaults.ImagePullSecrets, ",") != "ngc" {
		t.Errorf("workspace configuration %+v, want namespace team-ns and the workspace's pod defaults", got)
	}
	recordHistory(t, ctx, workflows.JobWorkflowID(ws, "configured"), "training_job_workspace_config.json")
}
