package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
)

func i64(n int64) *int64 { return new(n) }

// cohortQuota is workspace a's quota in cohort research: one job borrows and is being
// reclaimed, a queued job waits for two others to stop.
func cohortQuota() *api.QuotaStatus {
	t0 := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)
	return &api.QuotaStatus{
		Workspace: "a",
		Limits: api.Quota{GPU: i64(8), CPU: "64", Memory: "256Gi", GPUModels: map[string]int64{"NVIDIA-A100-SXM4-80GB": 4},
			Cohort: "research", BorrowingLimit: &api.QuotaLimit{GPU: i64(4)}, LendingLimit: &api.QuotaLimit{CPU: "32"}, Weight: 2,
			Preemption: &api.QuotaPreemption{ReclaimWithinCohort: "LowerPriority"}},
		Used:     api.QuotaUsage{GPU: 10, CPU: "40", Memory: "160Gi", GPUModels: map[string]int64{"NVIDIA-A100-SXM4-80GB": 3}},
		Borrowed: api.QuotaUsage{GPU: 2, CPU: "0", Memory: "0"},
		Lent:     api.QuotaUsage{GPU: 0, CPU: "8", Memory: "0"},
		Admitted: []api.QuotaJob{
			{Job: "train", Priority: 10, Resources: api.QuotaUsage{GPU: 8, CPU: "32", Memory: "128Gi"}, Since: t0},
			{Job: "extra", Resources: api.QuotaUsage{GPU: 2, CPU: "8", Memory: "32Gi"}, Since: t0, Borrowing: true,
				Preempting: &api.QuotaPreemptionInfo{By: "eval", Workspace: "b", Reason: "Reclaimed", Since: t0.Add(time.Minute)}},
		},
		Queue: []api.QuotaJob{{Job: "big", Priority: 5, Resources: api.QuotaUsage{GPU: 4, CPU: "16", Memory: "64Gi"}, Since: t0,
			WaitingFor: []string{"small-1", "small-2"}}},
		Cohort: &api.CohortStatus{Name: "research",
			Pool:     api.QuotaUsage{GPU: 16, CPU: "96", Memory: "512Gi"},
			Borrowed: api.QuotaUsage{GPU: 2, CPU: "0", Memory: "0"},
			Members: []api.CohortMember{
				{Workspace: "a", Nominal: api.QuotaUsage{GPU: 8, CPU: "64", Memory: "256Gi"}, Used: api.QuotaUsage{GPU: 10, CPU: "40", Memory: "160Gi"},
					Borrowed: api.QuotaUsage{GPU: 2, CPU: "0", Memory: "0"}, Lent: api.QuotaUsage{CPU: "8"}, Weight: 2, Share: 0.0625, Admitted: 2, Queued: 1},
				{Workspace: "b", Nominal: api.QuotaUsage{GPU: 8, CPU: "32", Memory: "256Gi"}, Used: api.QuotaUsage{GPU: 6, CPU: "12", Memory: "64Gi"},
					Lent: api.QuotaUsage{GPU: 2}, Weight: 1, Admitted: 1, Queued: 3},
			}},
	}
}

// cells are the texts of the cells of the row of table id whose attribute attr is key.
func cells(t *testing.T, body, id, attr, key string) []string {
	t.Helper()
	i := strings.Index(body, `<table id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no table %s:\n%s", id, body)
	}
	table := body[i : i+strings.Index(body[i:], "</table>")]
	j := strings.Index(table, attr+`="`+key+`"`)
	if j < 0 {
		t.Fatalf("table %s has no row %s=%s:\n%s", id, attr, key, table)
	}
	row := table[j : j+strings.Index(table[j:], "</tr>")]
	var out []string
	for _, m := range regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`).FindAllStringSubmatch(row, -1) {
		out = append(out, strings.TrimSpace(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[1], "")))
	}
	return out
}

// The workspace page shows a cohort member's quota: the policy, the figures per
// resource with borrowed, lent and the limits, the admitted jobs' borrowing and
// preemption, what the queue waits for, and the members' figures.
func TestWorkspacePageShowsTheCohortQuota(t *testing.T) {
	f := &readsAPI{quota: cohortQuota()}
	body := f.page(t, "tok-m", "/ui/ws/a/workspace")
	for _, want := range []string{"<dt>Cohort</dt><dd>research</dd>", "<dt>Weight</dt><dd>2</dd>",
		"<dt>Reclaim within cohort</dt><dd>LowerPriority</dd>", "<dt>Preempt within workspace</dt><dd>Never</dd>",
		`<h3 id="cohort-h">Cohort research</h3>`,
		"<dt>Pool</dt><dd>16 GPUs, 96 CPU, 512Gi memory</dd>", "<dt>Borrowed</dt><dd>2 GPUs, 0 CPU, 0 memory</dd>"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, c := range []struct {
		table, attr, key string
		want             []string
	}{
		// Resource, used, nominal, borrowed, lent, borrowing limit, lending limit.
		{"quota", "data-resource", "gpu", []string{"GPUs", "10", "8", "2", "0", "4", "all"}},
		{"quota", "data-resource", "gpu/NVIDIA-A100-SXM4-80GB", []string{"GPUs NVIDIA-A100-SXM4-80GB", "3", "4", "0", "0", "unbounded", "all"}},
		{"quota", "data-resource", "cpu", []string{"CPU", "40", "64", "0", "8", "unbounded", "32"}},
		{"quota", "data-resource", "memory", []string{"Memory", "160Gi", "256Gi", "0", "0", "unbounded", "all"}},
		{"admitted", "data-job", "train", []string{"train", "10", "8", "32", "128Gi", "2026-12-07T09:30:00Z", "no", ""}},
		{"admitted", "data-job", "extra", []string{"extra", "0", "2", "8", "32Gi", "2026-12-07T09:30:00Z", "yes",
			"by eval (workspace b, Reclaimed) since 2026-12-07T09:31:00Z"}},
		{"queue", "data-job", "big", []string{"big", "5", "4", "16", "64Gi", "2026-12-07T09:30:00Z", "small-1, small-2", "Priority of big  Set"}},
		{"cohort", "data-member", "a", []string{"a", "8 GPUs, 64 CPU, 256Gi memory", "10 GPUs, 40 CPU, 160Gi memory",
			"2 GPUs, 0 CPU, 0 memory", "0 GPUs, 8 CPU, 0 memory", "2", "0.06", "2", "1"}},
		{"cohort", "data-member", "b", []string{"b", "8 GPUs, 32 CPU, 256Gi memory", "6 GPUs, 12 CPU, 64Gi memory",
			"0 GPUs, 0 CPU, 0 memory", "2 GPUs, 0 CPU, 0 memory", "1", "0.00", "1", "3"}},
	} {
		if got := cells(t, body, c.table, c.attr, c.key); strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s row %s:\n got %q\nwant %q", c.table, c.key, got, c.want)
		}
	}
	// A member may change a queued job's priority: the form posts to the job's
	// priority with the session's CSRF token.
	if !strings.Contains(body, `<form method="post" action="/ui/ws/a/jobs/big/priority" class="inline"><input type="hidden" name="csrf" value="`) ||
		!strings.Contains(body, `name="priority" type="number" min="-1000" max="1000" step="1" value="5"`) {
		t.Errorf("no priority form for the queued job:\n%s", body)
	}
	// A viewer is shown the figures, not the form.
	if body := (&readsAPI{quota: cohortQuota()}).page(t, "tok-v", "/ui/ws/a/workspace"); strings.Contains(body, "/priority") ||
		!strings.Contains(body, `data-member="b"`) {
		t.Errorf("a viewer's page offers the priority form or lacks the cohort")
	}
}

// Outside a cohort the page shows no borrowing columns and no cohort section.
func TestWorkspacePageWithoutCohort(t *testing.T) {
	f := &readsAPI{quota: &api.QuotaStatus{Workspace: "a", Limits: api.Quota{GPU: i64(4)}, Used: api.QuotaUsage{GPU: 1, CPU: "2", Memory: "4Gi"}}}
	body := f.page(t, "tok-m", "/ui/ws/a/workspace")
	if got := cells(t, body, "quota", "data-resource", "gpu"); strings.Join(got, "|") != "GPUs|1|4" {
		t.Errorf("gpu row %q", got)
	}
	if got := cells(t, body, "quota", "data-resource", "cpu"); strings.Join(got, "|") != "CPU|2|unlimited" {
		t.Errorf("cpu row %q", got)
	}
	for _, not := range []string{"Borrowed", `id="cohort"`, "<dt>Cohort</dt>", "Reclaim within cohort"} {
		if strings.Contains(body, not) {
			t.Errorf("a workspace outside a cohort shows %q", not)
		}
	}
	if !strings.Contains(body, "<dt>Preempt within workspace</dt><dd>Never</dd>") || !strings.Contains(body, "Nothing waits.") {
		t.Errorf("page lacks the policy or the empty queue")
	}
}

// The queue's form changes the job's priority through the API, with the session's
// token, and shows the workspace page again; a priority that is not a number is
// refused before the API is asked.
func TestWorkspacePageSetsAJobsPriority(t *testing.T) {
	f := &readsAPI{quota: cohortQuota()}
	srv := httptest.NewServer(Mount(f, Options{}))
	defer srv.Close()
	c := browserish(t)
	resp, err := c.Get(srv.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	m := csrfInput.FindStringSubmatch(readAll(t, resp))
	if m == nil {
		t.Fatal("no CSRF field on the sign-in page")
	}
	if resp, err = c.PostForm(srv.URL+"/ui/login", url.Values{"csrf": {m[1]}, "token": {"tok-m"}}); err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp, err = c.Get(srv.URL + "/ui/ws/a/workspace"); err != nil {
		t.Fatal(err)
	}
	if m = csrfInput.FindStringSubmatch(readAll(t, resp)); m == nil {
		t.Fatal("no CSRF token on the workspace page")
	}
	csrf := m[1]
	post := func(priority string) *http.Response {
		resp, err := c.PostForm(srv.URL+"/ui/ws/a/jobs/big/priority", url.Values{"csrf": {csrf}, "priority": {priority}})
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp
	}
	resp = post(" -20 ")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/ws/a/workspace#queue-h" {
		t.Fatalf("priority form answered %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := strings.Join(f.recorded(), "; "); got != "dev /v1/workspaces/a/jobs/big/priority? priority=-20" {
		t.Fatalf("API calls %q", got)
	}
	for _, bad := range []string{"high", "1001", ""} {
		if resp := post(bad); resp.StatusCode != http.StatusUnprocessableEntity {
			t.Errorf("priority %q answered %d, want 422", bad, resp.StatusCode)
		}
	}
	if got := f.recorded(); len(got) != 1 {
		t.Errorf("refused priorities reached the API: %q", got)
	}
}
