package integration

import (
	"errors"
	"net/http"
	"testing"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/integration/itest"
)

// Finding 5 of issue 33 on the real stack: cpu "1e400", memory "1e400" and cpu
// "9223372036854775807" were admitted under a 2-CPU quota (counted as 0, 0 and -1
// CPU). Each is now refused at submission with 422 naming the field, and nothing is
// created: no job, nothing admitted or queued in the workspace's quota.
func TestQuotaRefusesQuantitiesPastAnyNode(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	if err := env.api.SetQuota(ctx, ws, api.Quota{CPU: "2"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, resources, field string }{
		{"cpu-1e400", `{cpu: "1e400"}`, "spec.roles.worker.resources.cpu"},
		{"memory-1e400", `{cpu: "1", memory: "1e400"}`, "spec.roles.worker.resources.memory"},
		{"cpu-maxint64", `{cpu: "9223372036854775807"}`, "spec.roles.worker.resources.cpu"},
	} {
		_, err := env.api.SubmitJob(ctx, []byte(itest.JobDoc(tc.name, ws, `
  framework: custom
  command: [sh, -c, "sleep 60"]
  roles: {worker: {replicas: 1, resources: `+tc.resources+`}}
`)))
		var e *dlc.Error
		if !errors.As(err, &e) || e.Status != http.StatusUnprocessableEntity {
			t.Errorf("%s: submitted (%v), want 422", tc.name, err)
			continue
		}
		if len(e.API.Details) != 1 || e.API.Details[0].Field != tc.field {
			t.Errorf("%s: details %+v, want one naming %s", tc.name, e.API.Details, tc.field)
		}
		if _, err := env.api.GetJob(ctx, ws, tc.name); !dlc.IsNotFound(err) {
			t.Errorf("%s: GET after the refusal: %v, want 404", tc.name, err)
		}
	}
	q, err := env.api.GetQuota(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if len(q.Admitted) != 0 || len(q.Queue) != 0 || q.Used.CPU != "0" {
		t.Errorf("quota after the refusals: used %s CPU, %d admitted, %d queued; want nothing", q.Used.CPU, len(q.Admitted), len(q.Queue))
	}
	// The quota itself refuses limits it cannot count.
	err = env.api.SetQuota(ctx, ws, api.Quota{CPU: "1e400"})
	var e *dlc.Error
	if !errors.As(err, &e) || e.Status/100 != 4 || len(e.API.Details) != 1 || e.API.Details[0].Field != "cpu" {
		t.Errorf("quota cpu 1e400: %v, want a 4xx naming cpu", err)
	}
}
