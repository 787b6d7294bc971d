package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/api/recreate"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
)

// jobPhases are the phases the jobs filter offers.
var jobPhases = []schemas.JobPhase{schemas.JobPending, schemas.JobQueued, schemas.JobHealthCheck,
	schemas.JobLaunching, schemas.JobRunning, schemas.JobRestarting, schemas.JobSucceeded,
	schemas.JobFailed, schemas.JobStopped}

// jobsData is the jobs page's.
type jobsData struct {
	Jobs       []api.JobSummary
	Phase      string
	Framework  string
	Label      string
	Phases     []schemas.JobPhase
	Frameworks []schemas.Framework
	// Next is the next page's query; empty on the last page.
	Next string
	// Now is when the page was made, for ages and durations.
	Now time.Time
}

// jobsPage lists the workspace's jobs, newest first, filtered by phase, framework and
// label (key=value, several separated by commas). With partial=rows it answers the
// table's rows only (the live update of the page).
func (c *Console) jobsPage(w http.ResponseWriter, r *http.Request, k *call) error {
	q := r.URL.Query()
	d := jobsData{Phase: q.Get("phase"), Framework: q.Get("framework"), Label: strings.TrimSpace(q.Get("label")),
		Phases: jobPhases, Frameworks: frameworks.Supported(), Now: time.Now()}
	o := client.ListOptions{Phase: d.Phase, Framework: d.Framework, Limit: 100, PageToken: q.Get("pageToken")}
	for l := range strings.SplitSeq(d.Label, ",") {
		if l = strings.TrimSpace(l); l != "" {
			o.Labels = append(o.Labels, l)
		}
	}
	list, err := k.api.ListJobs(r.Context(), k.ws, o)
	if err != nil {
		return err
	}
	d.Jobs = list.Items
	if list.NextPageToken != "" {
		nq := q
		nq.Set("pageToken", list.NextPageToken)
		nq.Del("partial")
		d.Next = nq.Encode()
	}
	return c.render(w, http.StatusOK, "jobs", partial(r, "rows"), k.page("Jobs", "jobs", d))
}

// partial is the partial the request asks for when it is one of allowed.
func partial(r *http.Request, allowed ...string) string {
	p := r.URL.Query().Get("partial")
	if slices.Contains(allowed, p) {
		return p
	}
	return ""
}

// jobData is the job page's.
type jobData struct {
	Job      *api.Job
	SpecYAML string
	// Command is the dlc command (and Go program) that recreates the job
	// (package api/recreate, as `dlc job get NAME -o command` prints it).
	Command string
	// Replicas name the replicas whose logs can be read: role-index.
	Replicas []string
	Charts   []chart
	Now      time.Time
}

// jobPage shows one job. With partial=status it answers the status section only (the
// live update of the page).
func (c *Console) jobPage(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	job, err := k.api.GetJob(r.Context(), k.ws, name)
	if err != nil {
		return err
	}
	d := jobData{Job: job, Replicas: replicaNames(job), Now: time.Now()}
	p := partial(r, "status")
	if p == "" {
		spec, err := yaml.Marshal(job.Spec)
		if err != nil {
			return err
		}
		d.SpecYAML = string(spec)
		script, err := recreate.Job(&job.Spec)
		if err != nil {
			return err
		}
		d.Command = script.Text()
		if d.Charts, err = c.metricCharts(r, k, job); err != nil {
			return err
		}
	}
	return c.render(w, http.StatusOK, "job", p, k.page("Job "+name, "jobs", d))
}

// replicaNames lists a job's replicas as role-index, from its spec, in role order.
func replicaNames(job *api.Job) []string {
	roles := make([]string, 0, len(job.Spec.Spec.Roles))
	for role := range job.Spec.Spec.Roles {
		roles = append(roles, role)
	}
	slices.Sort(roles)
	var out []string
	for _, role := range roles {
		for i := range int(job.Spec.Spec.Roles[role].Replicas) {
			out = append(out, fmt.Sprintf("%s-%d", role, i))
		}
	}
	return out
}

// jobCharts answers the metric charts of a job (the live update of its page).
func (c *Console) jobCharts(w http.ResponseWriter, r *http.Request, k *call) error {
	job, err := k.api.GetJob(r.Context(), k.ws, r.PathValue("name"))
	if err != nil {
		return err
	}
	charts, err := c.metricCharts(r, k, job)
	if err != nil {
		return err
	}
	return c.render(w, http.StatusOK, "job", "charts", k.page("", "jobs", jobData{Job: job, Charts: charts}))
}

// stopJob stops a job (the API answers once it is terminal), then shows it.
func (c *Console) stopJob(w http.ResponseWriter, r *http.Request, k *call) error {
	name := r.PathValue("name")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if reason == "" {
		reason = "stopped from the console by " + k.s.who.Name
	}
	if _, err := k.api.StopJob(r.Context(), k.ws, name, reason); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "jobs", name), http.StatusSeeOther)
	return nil
}

// deleteJob deletes a job (stopping it first if it runs), then shows the list.
func (c *Console) deleteJob(w http.ResponseWriter, r *http.Request, k *call) error {
	if err := k.api.DeleteJob(r.Context(), k.ws, r.PathValue("name")); err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "jobs"), http.StatusSeeOther)
	return nil
}

// cloneJob starts a new job from this one's spec with overrides, a JSON merge patch
// of the spec document written in YAML or JSON, then shows the new job.
func (c *Console) cloneJob(w http.ResponseWriter, r *http.Request, k *call) error {
	name := strings.TrimSpace(r.PostFormValue("name"))
	overrides, err := parseOverrides(r.PostFormValue("overrides"))
	if err != nil {
		c.errorPage(w, r, k.s, http.StatusUnprocessableEntity, err.Error())
		return nil
	}
	job, err := k.api.CloneJob(r.Context(), k.ws, r.PathValue("name"), name, overrides)
	if err != nil {
		return err
	}
	http.Redirect(w, r, wsPath(k.ws, "jobs", job.Spec.Metadata.Name), http.StatusSeeOther)
	return nil
}

// parseOverrides reads the clone form's overrides: empty, or a YAML or JSON object.
func parseOverrides(text string) (map[string]any, error) {
	if strings.TrimSpace(text) == "" {
		return nil, nil
	}
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("overrides: not YAML or JSON: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil || m == nil {
		return nil, errors.New("overrides: must be an object (a merge patch of the job document, such as spec: {faultTolerance: {maxRestarts: 2}})")
	}
	return m, nil
}
