package console

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

// fakeAPI answers the few API routes these tests use, for two tokens of two
// workspaces, and records the stops it was asked for. (The integration test runs the
// console on the real API.)
type fakeAPI struct {
	mu    sync.Mutex
	stops []string
	// revoked tokens answer 401.
	revoked map[string]bool
}

var fakeTokens = map[string]api.Identity{
	"tok-a": {Name: "alice", Workspace: "a", Role: api.RoleMember},
	"tok-b": {Name: "bob", Workspace: "b", Role: api.RoleMember},
	"tok-v": {Name: "val", Workspace: "a", Role: api.RoleViewer},
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	who, ok := fakeTokens[tok]
	f.mu.Lock()
	if f.revoked[tok] {
		ok = false
	}
	f.mu.Unlock()
	if !ok {
		writeAPIError(w, http.StatusUnauthorized, "invalid token")
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(who) })
	mux.HandleFunc("GET /v1/workspaces/{ws}/jobs", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ws") != who.Workspace {
			writeAPIError(w, http.StatusNotFound, "workspace "+r.PathValue("ws")+" not found")
			return
		}
		_ = json.NewEncoder(w).Encode(api.JobList{Items: []api.JobSummary{{Name: "job-of-" + who.Workspace, Workspace: who.Workspace,
			Phase: schemas.JobRunning, Framework: "pytorch", StartTime: time.Now().Add(-90 * time.Second)}}})
	})
	mux.HandleFunc("POST /v1/workspaces/{ws}/jobs/{name}/stop", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("ws") != who.Workspace {
			writeAPIError(w, http.StatusNotFound, "job not found")
			return
		}
		if who.Role == api.RoleViewer {
			writeAPIError(w, http.StatusForbidden, "role viewer may not submit, change or delete here")
			return
		}
		f.mu.Lock()
		f.stops = append(f.stops, r.PathValue("ws")+"/"+r.PathValue("name")+" by "+who.Name)
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(api.StopResult{Phase: schemas.JobStopped})
	})
	mux.ServeHTTP(w, r)
}

func writeAPIError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Error: api.Error{Code: http.StatusText(status), Message: msg}})
}

func (f *fakeAPI) stopped() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.stops...)
}

// browserish is an HTTP client with a cookie jar that does not follow redirects.
func browserish(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func startConsole(t *testing.T, opts Options) (*httptest.Server, *fakeAPI) {
	f := &fakeAPI{revoked: map[string]bool{}}
	srv := httptest.NewServer(Mount(f, opts))
	t.Cleanup(srv.Close)
	return srv, f
}

var csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs in with token and returns the CSRF token of the landing page.
func signIn(t *testing.T, c *http.Client, base, token string) string {
	t.Helper()
	resp, err := c.Get(base + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	m := csrfInput.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF field on the sign-in page: %s", body)
	}
	resp, err = c.PostForm(base+"/ui/login", url.Values{"csrf": {m[1]}, "token": {token}})
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in answered %d, want 303", resp.StatusCode)
	}
	resp, err = c.Get(base + "/ui/ws/" + fakeTokens[token].Workspace + "/jobs")
	if err != nil {
		t.Fatal(err)
	}
	body = readAll(t, resp)
	if m = csrfInput.FindStringSubmatch(body); m == nil {
		t.Fatalf("no CSRF token on the jobs page: %s", body)
	}
	return m[1]
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func findCookie(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func TestSignInRedirectsAndSetsStrictCookies(t *testing.T) {
	for _, tls := range []bool{false, true} {
		srv, _ := startConsole(t, Options{TLS: tls})
		c := browserish(t)
		resp, err := c.Get(srv.URL + "/ui/ws/a/jobs?phase=Running")
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/ui/login?next="+url.QueryEscape("/ui/ws/a/jobs?phase=Running") {
			t.Fatalf("unsigned page: %d to %q, want 303 to the sign-in page", resp.StatusCode, loc)
		}
		resp, _ = c.Get(srv.URL + "/ui/login")
		body := readAll(t, resp)
		csrf := csrfInput.FindStringSubmatch(body)[1]
		// The cookie jar keeps no Secure cookie over plain HTTP: send it by hand.
		login := func(form url.Values) *http.Response {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/login", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(&http.Cookie{Name: loginCookie, Value: csrf})
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAll(t, resp)
			return resp
		}
		if r := login(url.Values{"token": {"tok-a"}}); r.StatusCode != http.StatusForbidden {
			t.Fatalf("sign-in without the form's CSRF token answered %d, want 403", r.StatusCode)
		}
		if r := login(url.Values{"csrf": {csrf}, "token": {"nope"}}); r.StatusCode != http.StatusUnauthorized || findCookie(r, sessionCookie) != nil {
			t.Fatalf("sign-in with a bad token answered %d (session cookie %v), want 401 and none", r.StatusCode, findCookie(r, sessionCookie))
		}
		r := login(url.Values{"csrf": {csrf}, "token": {"tok-a"}, "next": {"//evil.example/"}})
		ck := findCookie(r, sessionCookie)
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/ui/" || ck == nil {
			t.Fatalf("sign-in answered %d to %q with cookie %v, want 303 to /ui/ (never another site)", r.StatusCode, r.Header.Get("Location"), ck)
		}
		if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != tls || ck.Path != "/ui/" || strings.Contains(ck.Value, "tok-a") {
			t.Fatalf("TLS %v: session cookie %+v: want HttpOnly, SameSite=Strict, Secure=%v, path /ui/, not the token", tls, ck, tls)
		}
	}
}

func TestCSRFIsRequiredOnEveryPost(t *testing.T) {
	srv, f := startConsole(t, Options{})
	c := browserish(t)
	csrf := signIn(t, c, srv.URL, "tok-a")
	post := func(path string, form url.Values, header http.Header) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		maps.Copy(req.Header, header)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		return resp.StatusCode
	}
	for name, tc := range map[string]struct {
		form   url.Values
		header http.Header
	}{
		"none":         {url.Values{}, nil},
		"wrong":        {url.Values{"csrf": {"x" + csrf}}, nil},
		"other origin": {url.Values{"csrf": {csrf}}, http.Header{"Origin": {"http://evil.example"}}},
	} {
		if got := post("/ui/ws/a/jobs/j1/stop", tc.form, tc.header); got != http.StatusForbidden {
			t.Errorf("%s: stop answered %d, want 403", name, got)
		}
		if got := post("/ui/logout", tc.form, tc.header); got != http.StatusForbidden {
			t.Errorf("%s: sign-out answered %d, want 403", name, got)
		}
	}
	if s := f.stopped(); len(s) != 0 {
		t.Fatalf("refused POSTs reached the API: %v", s)
	}
	if got := post("/ui/ws/a/jobs/j1/stop", url.Values{"csrf": {csrf}}, http.Header{"Origin": {srv.URL}}); got != http.StatusSeeOther {
		t.Fatalf("stop with the CSRF token answered %d, want 303", got)
	}
	if got := post("/ui/ws/a/jobs/j2/stop", url.Values{}, http.Header{csrfHeader: {csrf}}); got != http.StatusSeeOther {
		t.Fatalf("stop with the CSRF header answered %d, want 303", got)
	}
	if s := f.stopped(); len(s) != 2 || s[0] != "a/j1 by alice" || s[1] != "a/j2 by alice" {
		t.Fatalf("the API saw stops %v, want a/j1 and a/j2 by alice's token", s)
	}
}

func TestWorkspaceIsolationComesFromTheAPI(t *testing.T) {
	srv, f := startConsole(t, Options{})
	c := browserish(t)
	csrf := signIn(t, c, srv.URL, "tok-b")
	resp, _ := c.Get(srv.URL + "/ui/ws/b/jobs")
	if body := readAll(t, resp); !strings.Contains(body, "job-of-b") || strings.Contains(body, "job-of-a") || !strings.Contains(body, "pytorch") {
		t.Fatalf("b's jobs page: %s", body)
	}
	resp, _ = c.Get(srv.URL + "/ui/ws/a/jobs")
	if body := readAll(t, resp); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "job-of-a") {
		t.Fatalf("b reading a's jobs: %d %s, want the API's 404", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ui/ws/a/jobs/job-of-a/stop", strings.NewReader("csrf="+csrf))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, _ = c.Do(req)
	readAll(t, resp)
	if resp.StatusCode != http.StatusNotFound || len(f.stopped()) != 0 {
		t.Fatalf("b stopping a's job: %d, stops %v; want 404 and none", resp.StatusCode, f.stopped())
	}
}

func TestViewerSeesNoActionsAndIsRefused(t *testing.T) {
	srv, f := startConsole(t, Options{})
	c := browserish(t)
	csrf := signIn(t, c, srv.URL, "tok-v")
	resp, _ := c.Get(srv.URL + "/ui/ws/a/jobs")
	if body := readAll(t, resp); strings.Contains(body, "/stop\"") || strings.Contains(body, ">Delete<") {
		t.Fatalf("a viewer's jobs page offers actions: %s", body)
	}
	resp, _ = c.PostForm(srv.URL+"/ui/ws/a/jobs/job-of-a/stop", url.Values{"csrf": {csrf}})
	if body := readAll(t, resp); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "role viewer") || len(f.stopped()) != 0 {
		t.Fatalf("a viewer's stop: %d %s", resp.StatusCode, body)
	}
}

func TestRevokedTokenEndsTheSession(t *testing.T) {
	srv, f := startConsole(t, Options{})
	c := browserish(t)
	signIn(t, c, srv.URL, "tok-a")
	f.mu.Lock()
	f.revoked["tok-a"] = true
	f.mu.Unlock()
	resp, _ := c.Get(srv.URL + "/ui/ws/a/jobs")
	readAll(t, resp)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Fatalf("page after revocation: %d to %q, want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	f.mu.Lock()
	f.revoked["tok-a"] = false
	f.mu.Unlock()
	resp, _ = c.Get(srv.URL + "/ui/ws/a/jobs")
	readAll(t, resp)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the session must have ended with the revocation; got %d", resp.StatusCode)
	}
}

func TestAPIRoutesStillServed(t *testing.T) {
	srv, _ := startConsole(t, Options{})
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer tok-a")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("API behind the console: %d %s", resp.StatusCode, body)
	}
	resp, _ = http.Get(srv.URL + "/ui/static/console.js")
	if body := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(body, "EventSource") {
		t.Fatalf("embedded script: %d", resp.StatusCode)
	}
}

func TestInProcessStreamsBeforeTheHandlerEnds(t *testing.T) {
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Test", r.RemoteAddr)
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, "first\n")
		<-release
		_, _ = io.WriteString(w, "second\n")
	})
	c := &http.Client{Transport: inProcess{api: h, remoteAddr: "192.0.2.7:1234"}}
	resp, err := c.Get("http://console.invalid/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Test") != "192.0.2.7:1234" {
		t.Fatalf("status %d, remote %q", resp.StatusCode, resp.Header.Get("X-Test"))
	}
	rd := bufio.NewReader(resp.Body)
	if line, _ := rd.ReadString('\n'); line != "first\n" {
		t.Fatalf("first line %q", line)
	}
	close(release)
	if line, _ := rd.ReadString('\n'); line != "second\n" {
		t.Fatalf("second line %q", line)
	}
}

func TestChartsEscapeAndTrackBestSoFar(t *testing.T) {
	ch := chart{ID: "metric-x", Title: `<script>x</script>`, XLabel: "step",
		Series: []series{{Name: `"><b>`, Points: []point{{1, 3}, {2, 1}, {3, 2}}}}}
	svg := string(ch.SVG())
	if strings.Contains(svg, "<script>") || strings.Contains(svg, `"><b>`) || !strings.Contains(svg, `data-points="3"`) {
		t.Fatalf("svg not escaped or wrong count: %s", svg)
	}
	v := func(f float64) *float64 { return &f }
	exp := &api.ExperimentDetail{Spec: schemas.Experiment{Spec: schemas.ExperimentSpec{
		Objective: schemas.ObjectiveSpec{Metric: "loss", Direction: schemas.Minimize}}},
		Status: schemas.ExperimentStatus{Trials: []schemas.TrialStatus{
			{ID: 2, Value: v(0.5)}, {ID: 0, Value: v(0.9)}, {ID: 1, Value: v(0.7)}, {ID: 3}, {ID: 4, Value: v(0.6)}}}}
	oc := objectiveChart(exp)
	var best []float64
	for _, p := range oc.Series[1].Points {
		best = append(best, p.Y)
	}
	if want := []float64{0.9, 0.7, 0.5, 0.5}; len(best) != len(want) || best[0] != want[0] || best[1] != want[1] || best[2] != want[2] || best[3] != want[3] {
		t.Fatalf("best so far %v, want %v", best, want)
	}
}

func TestScheduleRunsAreListedOnceNewestFirst(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	run := func(h int, job string, o schemas.RunOutcome) schemas.ScheduleRun {
		return schemas.ScheduleRun{NominalTime: t0.Add(time.Duration(h) * time.Hour), Trigger: schemas.TriggerSchedule, Job: job, Outcome: o}
	}
	st := schemas.ScheduleStatus{
		History:  []schemas.ScheduleRun{run(1, "j1", schemas.RunSucceeded), run(2, "j2", schemas.RunRunning)},
		Running:  []schemas.ScheduleRun{run(2, "j2", schemas.RunRunning)},
		Buffered: []schemas.ScheduleRun{run(3, "", schemas.RunBuffered)},
	}
	var got []string
	for _, r := range scheduleRuns(st) {
		got = append(got, fmt.Sprintf("%d:%s:%s", r.NominalTime.Hour(), r.Job, r.Outcome))
	}
	if want := "3::Buffered 2:j2:Running 1:j1:Succeeded"; strings.Join(got, " ") != want {
		t.Fatalf("runs %v, want %s", got, want)
	}
}

func TestDAGPlacesStepsAfterWhatTheyDependOn(t *testing.T) {
	steps := []pipelineStep{
		{StepStatus: schemas.StepStatus{Name: "c", Phase: schemas.StepPending}, DependsOn: []string{"b"}},
		{StepStatus: schemas.StepStatus{Name: "a", Phase: schemas.StepSucceeded}},
		{StepStatus: schemas.StepStatus{Name: "b<x>", Phase: schemas.StepRunning}, DependsOn: []string{"a"}},
	}
	steps[0].DependsOn = []string{"b<x>"}
	svg := string(dagSVG(steps))
	if strings.Contains(svg, "<x>") || strings.Count(svg, `class="edge"`) != 2 {
		t.Fatalf("dag: %s", svg)
	}
	// a is in column 0, b in column 1, c in column 2.
	for _, want := range []string{`data-step="a" data-phase="Succeeded"><rect x="8"`, `data-step="b&lt;x&gt;" data-phase="Running"><rect x="218"`, `data-step="c" data-phase="Pending"><rect x="428"`} {
		if !strings.Contains(svg, want) {
			t.Fatalf("dag lacks %s: %s", want, svg)
		}
	}
}
