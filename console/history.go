package console

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
)

// Run records (issue 41): a workspace's history of finished runs, one run's record,
// and the workspace's resource usage per day, read through the API
// (GET /v1/workspaces/{ws}/history..., GET /v1/usage) with the session's token.

// historyKinds and historyPhases are what the history filter offers.
var (
	historyKinds  = runs.Kinds
	historyPhases = []string{string(schemas.JobSucceeded), string(schemas.JobFailed), string(schemas.JobStopped)}
)

// historyData is the history page's.
type historyData struct {
	Records []runs.Record
	Kind    string
	Phase   string
	Name    string
	// Checkpoint, when set, keeps the runs that wrote or read under this URI (the
	// links of a run record's checkpoint and inputs).
	Checkpoint string
	Kinds      []runs.Kind
	Phases     []string
	// Next is the next page's query; empty on the last page.
	Next string
	// Off is the API's message when the server keeps no run records.
	Off string
}

// historyPage lists the workspace's run records, newest first, filtered by kind,
// phase and name, and by a checkpoint or data URI (the runs that wrote or read under
// it) when a run record's page links to it.
func (c *Console) historyPage(w http.ResponseWriter, r *http.Request, k *call) error {
	q := r.URL.Query()
	d := historyData{Kind: q.Get("kind"), Phase: q.Get("phase"), Name: q.Get("name"), Checkpoint: q.Get("checkpoint"),
		Kinds: historyKinds, Phases: historyPhases}
	page, err := k.api.History(r.Context(), k.ws, client.HistoryQuery{Kind: runs.Kind(d.Kind), Phase: d.Phase, Name: d.Name,
		Checkpoint: d.Checkpoint, Limit: 100, After: q.Get("after")})
	if d.Off, err = runRecordsOff(err); err != nil {
		return err
	}
	if page != nil {
		d.Records = page.Records
		if page.Next != "" {
			nq := maps.Clone(q)
			nq.Set("after", page.Next)
			d.Next = nq.Encode()
		}
	}
	return c.render(w, http.StatusOK, "history", "", k.page("History", "history", d))
}

// runRecordsOff turns the API's 503 of a server without run records into the page's
// note; any other error stays an error.
func runRecordsOff(err error) (string, error) {
	if ae, ok := errors.AsType[*client.Error](err); ok && ae.Status == http.StatusServiceUnavailable {
		return ae.Error(), nil
	}
	return "", err
}

// runData is a run record's page.
type runData struct {
	Rec runs.Record
	// Metrics are the final metrics' names, sorted.
	Metrics []string
	// Children are the runs whose parent this one is (an experiment's trials, a
	// pipeline run's steps).
	Children []runs.Record
	// ParentKind is the kind of the run this one is part of: an experiment's for a
	// trial, a pipeline's for a step.
	ParentKind string
}

// runPage shows one run record: its facts, attempts, metrics and lineage (inputs,
// checkpoint, origin, parent, the runs it made).
func (c *Console) runPage(w http.ResponseWriter, r *http.Request, k *call) error {
	kind := runs.Kind(r.PathValue("kind"))
	rec, err := k.api.HistoryRecord(r.Context(), k.ws, kind, r.PathValue("uid"))
	if err != nil {
		return err
	}
	d := runData{Rec: *rec, Metrics: slices.Sorted(maps.Keys(rec.Metrics)), ParentKind: string(runs.KindPipeline)}
	if rec.Origin.Kind == runs.OriginExperiment {
		d.ParentKind = string(runs.KindExperiment)
	}
	if kind != runs.KindJob {
		children, err := k.api.History(r.Context(), k.ws, client.HistoryQuery{Parent: rec.UID, Limit: 1000})
		if err != nil {
			return err
		}
		d.Children = children.Records
	}
	return c.render(w, http.StatusOK, "run", "", k.page(string(rec.Kind)+" "+rec.Name, "history", d))
}

// usageData is the usage page's.
type usageData struct {
	Usage    *api.Usage
	From, To string
	// Total sums the rows.
	Total runs.UsageRow
	Off   string
}

// usagePage shows the workspace's resource-hours per day, over the last 30 days or
// from and to (YYYY-MM-DD, as the API reads them).
func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, k *call) error {
	q := r.URL.Query()
	d := usageData{From: q.Get("from"), To: q.Get("to")}
	uq := client.UsageQuery{Workspaces: []string{k.ws}}
	var err error
	if uq.From, err = formDate("from", d.From); err != nil {
		return err
	}
	if uq.To, err = formDate("to", d.To); err != nil {
		return err
	}
	d.Usage, err = k.api.Usage(r.Context(), uq)
	if d.Off, err = runRecordsOff(err); err != nil {
		return err
	}
	if d.Usage != nil {
		for _, row := range d.Usage.Rows {
			d.Total.GPUHours += row.GPUHours
			d.Total.CPUHours += row.CPUHours
			d.Total.MemoryGiBHours += row.MemoryGiBHours
		}
	}
	return c.render(w, http.StatusOK, "usage", "", k.page("Usage", "usage", d))
}

// formDate reads a date field of a form (YYYY-MM-DD, UTC); zero when empty. A bad one
// is the API's 400, naming the field.
func formDate(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return t, &client.Error{Status: http.StatusBadRequest, API: api.Error{Code: api.CodeInvalidArgument,
			Message: fmt.Sprintf("invalid %s %q", field, v),
			Details: []schemas.FieldError{{Field: field, Detail: "must be a date, YYYY-MM-DD"}}}}
	}
	return t, nil
}
