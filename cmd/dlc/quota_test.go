package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
)

// quotaAPI answers the quota routes: PUT and the priority POST echo their bodies, GET
// answers status; it records each request as "METHOD PATH" and its body.
type quotaAPI struct {
	mu     sync.Mutex
	status api.QuotaStatus
	calls  []string
	bodies [][]byte
}

func (f *quotaAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.bodies = append(f.bodies, body)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.Method + " " + r.URL.Path {
	case "PUT /v1/workspaces/ml/quota", "POST /v1/workspaces/ml/jobs/train/priority":
		_, _ = w.Write(body)
	case "GET /v1/workspaces/ml/quota":
		_ = json.NewEncoder(w).Encode(f.status)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"NotFound","message":"no route"}}`))
	}
}

// dlcQuota runs the CLI against f in workspace ml; it returns stdout, the requests and
// the error.
func dlcQuota(t *testing.T, f *quotaAPI, args ...string) (string, []string, [][]byte, error) {
	t.Helper()
	srv := httptest.NewServer(f)
	defer srv.Close()
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"--server", srv.URL, "--token", "tok", "-w", "ml"}, args...))
	err := root.Execute()
	f.mu.Lock()
	defer f.mu.Unlock()
	calls, bodies := f.calls, f.bodies
	f.calls, f.bodies = nil, nil
	return out.String(), calls, bodies, err
}

func i64(n int64) *int64 { return new(n) }

// Every flag of quota set lands in the PUT body, as the API spells it.
func TestQuotaSetSendsEveryFlag(t *testing.T) {
	f := &quotaAPI{}
	out, calls, bodies, err := dlcQuota(t, f, "quota", "set", "--gpu", "8", "--cpu", "64", "--memory", "256Gi",
		"--gpu-model", "NVIDIA-A100-SXM4-80GB=4", "--gpu-model", "NVIDIA-H100-80GB-HBM3=2", "--cohort", "research",
		"--borrowing-limit", "gpu=4,cpu=32", "--borrowing-limit", "memory=128Gi,gpu/NVIDIA-H100-80GB-HBM3=1",
		"--lending-limit", "gpu=6,gpu/NVIDIA-A100-SXM4-80GB=2", "--weight", "3",
		"--reclaim-within-cohort", "lowerpriority", "--preempt-within-workspace", "LowerPriority")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PUT /v1/workspaces/ml/quota"}, calls); diff != "" {
		t.Fatalf("requests (-want +got):\n%s", diff)
	}
	var got api.Quota
	if err := json.Unmarshal(bodies[0], &got); err != nil {
		t.Fatal(err)
	}
	want := api.Quota{GPU: i64(8), CPU: "64", Memory: "256Gi",
		GPUModels: map[string]int64{"NVIDIA-A100-SXM4-80GB": 4, "NVIDIA-H100-80GB-HBM3": 2}, Cohort: "research",
		BorrowingLimit: &api.QuotaLimit{GPU: i64(4), CPU: "32", Memory: "128Gi", GPUModels: map[string]int64{"NVIDIA-H100-80GB-HBM3": 1}},
		LendingLimit:   &api.QuotaLimit{GPU: i64(6), GPUModels: map[string]int64{"NVIDIA-A100-SXM4-80GB": 2}},
		Weight:         3,
		Preemption:     &api.QuotaPreemption{ReclaimWithinCohort: "LowerPriority", WithinWorkspace: "LowerPriority"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PUT body (-want +got):\n%s", diff)
	}
	if out != "quota of workspace ml set\n" {
		t.Errorf("output %q", out)
	}

	// Without the new flags the body is the nominal quota alone (gpu 0 is a limit, not
	// "unlimited").
	_, _, bodies, err = dlcQuota(t, f, "quota", "set", "--gpu", "0")
	if err != nil || string(bodies[0]) != `{"gpu":0}` {
		t.Errorf("quota set --gpu 0 sent %s (%v)", bodies, err)
	}
}

// A malformed flag value is refused, naming the flag, and nothing is sent.
func TestQuotaSetBadFlags(t *testing.T) {
	f := &quotaAPI{}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gpu", "-1"}, "--gpu"},
		{[]string{"--cpu", "lots"}, "--cpu"},
		{[]string{"--memory", "-1Gi"}, "--memory"},
		{[]string{"--gpu-model", "A100"}, "--gpu-model"},
		{[]string{"--gpu-model", "=4"}, "--gpu-model"},
		{[]string{"--gpu-model", "A100=two"}, "--gpu-model A100"},
		{[]string{"--gpu-model", "A100=1", "--gpu-model", "A100=2"}, "--gpu-model A100: given twice"},
		{[]string{"--cohort", "c", "--borrowing-limit", "gpus=4"}, `--borrowing-limit: unknown resource "gpus"`},
		{[]string{"--cohort", "c", "--borrowing-limit", "gpu"}, "--borrowing-limit"},
		{[]string{"--cohort", "c", "--borrowing-limit", "gpu=1.5"}, "--borrowing-limit gpu"},
		{[]string{"--cohort", "c", "--borrowing-limit", "gpu=1,gpu=2"}, "--borrowing-limit: gpu given twice"},
		{[]string{"--cohort", "c", "--lending-limit", "cpu=many"}, "--lending-limit cpu"},
		{[]string{"--cohort", "c", "--lending-limit", "memory="}, "--lending-limit memory"},
		{[]string{"--cohort", "c", "--lending-limit", "gpu/=1"}, `--lending-limit: unknown resource "gpu/"`},
		{[]string{"--cohort", "c", "--lending-limit", "gpu/A100=-1"}, "--lending-limit gpu/A100"},
		{[]string{"--cohort", "c", "--weight", "0"}, "--weight"},
		{[]string{"--cohort", "c", "--weight", "1001"}, "--weight"},
		{[]string{"--reclaim-within-cohort", "Always"}, "--reclaim-within-cohort"},
		{[]string{"--preempt-within-workspace", "Any"}, "--preempt-within-workspace"},
	} {
		_, calls, _, err := dlcQuota(t, f, append([]string{"quota", "set"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || len(calls) != 0 {
			t.Errorf("quota set %s: %v (sent %v), want an error naming %s", strings.Join(c.args, " "), err, calls, c.want)
		}
	}
}

var quotaT0 = time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)

// cohortStatus is workspace ml's quota in cohort research, with a borrowing job being
// reclaimed and a queued job waiting for it.
func cohortStatus() api.QuotaStatus {
	return api.QuotaStatus{
		Workspace: "ml",
		Limits: api.Quota{GPU: i64(8), CPU: "64", Memory: "256Gi", GPUModels: map[string]int64{"NVIDIA-A100-SXM4-80GB": 4},
			Cohort: "research", BorrowingLimit: &api.QuotaLimit{GPU: i64(4)}, LendingLimit: &api.QuotaLimit{CPU: "32"}, Weight: 2,
			Preemption: &api.QuotaPreemption{WithinWorkspace: "LowerPriority"}},
		Used:     api.QuotaUsage{GPU: 10, CPU: "40", Memory: "160Gi", GPUModels: map[string]int64{"NVIDIA-A100-SXM4-80GB": 4}},
		Borrowed: api.QuotaUsage{GPU: 2, CPU: "0", Memory: "0"},
		Lent:     api.QuotaUsage{GPU: 0, CPU: "8", Memory: "0"},
		Admitted: []api.QuotaJob{
			{Job: "train", Priority: 10, Resources: api.QuotaUsage{GPU: 8, CPU: "32", Memory: "128Gi"}, Since: quotaT0},
			{Job: "extra", Resources: api.QuotaUsage{GPU: 2, CPU: "8", Memory: "32Gi"}, Since: quotaT0.Add(time.Minute), Borrowing: true,
				Preempting: &api.QuotaPreemptionInfo{By: "eval", Workspace: "vision", Reason: "Reclaimed", Since: quotaT0.Add(2 * time.Minute)}},
		},
		Queue: []api.QuotaJob{
			{Job: "big", Priority: 5, Resources: api.QuotaUsage{GPU: 4, CPU: "16", Memory: "64Gi"}, Since: quotaT0.Add(3 * time.Minute),
				WaitingFor: []string{"small-1", "small-2"}},
			{Job: "later", Resources: api.QuotaUsage{GPU: 1, CPU: "1", Memory: "1Gi"}, Since: quotaT0.Add(4 * time.Minute)},
		},
		Cohort: &api.CohortStatus{Name: "research",
			Pool:     api.QuotaUsage{GPU: 16, CPU: "96", Memory: "512Gi"},
			Borrowed: api.QuotaUsage{GPU: 2, CPU: "0", Memory: "0"},
			Members: []api.CohortMember{
				{Workspace: "ml", Nominal: api.QuotaUsage{GPU: 8, CPU: "64", Memory: "256Gi"}, Used: api.QuotaUsage{GPU: 10, CPU: "40", Memory: "160Gi"},
					Borrowed: api.QuotaUsage{GPU: 2}, Weight: 2, Share: 0.0625, Admitted: 2, Queued: 2},
				{Workspace: "vision", Nominal: api.QuotaUsage{GPU: 8, CPU: "32", Memory: "256Gi"}, Used: api.QuotaUsage{GPU: 6, CPU: "12", Memory: "64Gi"},
					Lent: api.QuotaUsage{GPU: 2}, Weight: 1, Admitted: 1, Queued: 1},
			}},
	}
}

// quota get prints the settings, the figures per resource, the admitted jobs with
// borrowing and preempting, the queue with what each waits for, and the cohort's members.
func TestQuotaGetPrintsTheCohort(t *testing.T) {
	f := &quotaAPI{status: cohortStatus()}
	out, calls, _, err := dlcQuota(t, f, "quota", "get")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"GET /v1/workspaces/ml/quota"}, calls); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	lines := strings.Split(out, "\n")
	row := func(first string) []string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == first {
				return f
			}
		}
		t.Errorf("no row %s:\n%s", first, out)
		return nil
	}
	for first, want := range map[string]string{
		"Cohort:":                   "Cohort: research",
		"Weight:":                   "Weight: 2",
		"Preemption:":               "Preemption: reclaim within cohort Any, within workspace LowerPriority",
		"RESOURCE":                  "RESOURCE NOMINAL USED BORROWED LENT BORROWING-LIMIT LENDING-LIMIT",
		"gpu":                       "gpu 8 10 2 0 4 all",
		"gpu/NVIDIA-A100-SXM4-80GB": "gpu/NVIDIA-A100-SXM4-80GB 4 4 0 0 unbounded all",
		"cpu":                       "cpu 64 40 0 8 unbounded 32",
		"memory":                    "memory 256Gi 160Gi 0 0 unbounded all",
		"ADMITTED":                  "ADMITTED PRIORITY GPU CPU MEMORY SINCE BORROWING PREEMPTING",
		"train":                     "train 10 8 32 128Gi 09:30:00 no -",
		"extra":                     "extra 0 2 8 32Gi 09:31:00 yes by eval (workspace vision, Reclaimed)",
		"QUEUED":                    "QUEUED POSITION PRIORITY GPU CPU MEMORY SINCE WAITING-FOR",
		"big":                       "big 1 5 4 16 64Gi 09:33:00 small-1, small-2",
		"later":                     "later 2 0 1 1 1Gi 09:34:00 -",
		"WORKSPACE":                 "WORKSPACE NOMINAL USED BORROWED LENT WEIGHT SHARE ADMITTED QUEUED CPU USED/NOMINAL MEMORY USED/NOMINAL",
		"ml":                        "ml 8 10 2 0 2 0.06 2 2 40/64 160Gi/256Gi",
		"vision":                    "vision 8 6 0 2 1 0.00 1 1 12/32 64Gi/256Gi",
	} {
		if got := strings.Join(row(first), " "); got != want {
			t.Errorf("row %s: %q, want %q", first, got, want)
		}
	}
	if !strings.Contains(out, "Cohort research: pool gpu 16, cpu 96, memory 512Gi; borrowed gpu 2, cpu 0, memory 0\n") {
		t.Errorf("no cohort totals:\n%s", out)
	}
	// The columns line up: each member's SHARE starts where the header's does.
	header, ml := lines[indexOf(lines, "WORKSPACE")], lines[indexOf(lines, "ml ")]
	if strings.Index(header, "SHARE") != strings.Index(ml, "0.06") {
		t.Errorf("columns not aligned:\n%s\n%s", header, ml)
	}

	out, _, _, err = dlcQuota(t, f, "quota", "get", "-o", "json")
	var st api.QuotaStatus
	if err != nil || json.Unmarshal([]byte(out), &st) != nil || st.Cohort == nil || len(st.Cohort.Members) != 2 ||
		st.Admitted[1].Preempting.By != "eval" || st.Queue[0].WaitingFor[1] != "small-2" {
		t.Errorf("quota get -o json: %v\n%s", err, out)
	}
}

func indexOf(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return i
		}
	}
	return 0
}

// Outside a cohort there is nothing borrowed or lent to show, and no cohort section.
func TestQuotaGetWithoutCohort(t *testing.T) {
	f := &quotaAPI{status: api.QuotaStatus{Workspace: "ml", Limits: api.Quota{GPU: i64(4)},
		Used: api.QuotaUsage{GPU: 1, CPU: "2", Memory: "4Gi"}, Admitted: []api.QuotaJob{}, Queue: []api.QuotaJob{}}}
	out, _, _, err := dlcQuota(t, f, "quota", "get")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Preemption:  within workspace Never\n", "RESOURCE  NOMINAL    USED\n", "gpu       4          1\n",
		"cpu       unlimited  2\n", "memory    unlimited  4Gi\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	for _, not := range []string{"BORROWED", "Cohort", "WORKSPACE"} {
		if strings.Contains(out, not) {
			t.Errorf("output outside a cohort shows %s:\n%s", not, out)
		}
	}
}

// dlc job priority NAME N posts the priority; a negative one follows --; a priority
// that is not a number is refused before anything is sent.
func TestJobPriority(t *testing.T) {
	f := &quotaAPI{}
	out, calls, bodies, err := dlcQuota(t, f, "job", "priority", "train", "100")
	if err != nil || out != "job train: priority 100\n" {
		t.Fatalf("job priority: %v %q", err, out)
	}
	if diff := cmp.Diff([]string{"POST /v1/workspaces/ml/jobs/train/priority"}, calls); diff != "" || string(bodies[0]) != `{"priority":100}` {
		t.Errorf("requests %v, body %s", calls, bodies)
	}
	_, _, bodies, err = dlcQuota(t, f, "job", "priority", "train", "--", "-5")
	if err != nil || string(bodies[0]) != `{"priority":-5}` {
		t.Errorf("job priority train -- -5: %v, sent %s", err, bodies)
	}
	for _, bad := range []string{"high", "1.5", "99999999999"} {
		_, calls, _, err = dlcQuota(t, f, "job", "priority", "train", bad)
		if err == nil || !strings.Contains(err.Error(), "priority") || len(calls) != 0 {
			t.Errorf("job priority train %s: %v, sent %v", bad, err, calls)
		}
	}
	out, _, _, err = dlcQuota(t, f, "job", "priority", "train", "7", "-o", "json")
	if err != nil || strings.TrimSpace(out) != "{\n  \"priority\": 7\n}" {
		t.Errorf("job priority -o json: %v %q", err, out)
	}
}
