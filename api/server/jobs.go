package server

import (
	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// jobRoutes are the TrainingJob operations (registered in kinds.go); the handlers are
// in server.go, clone.go, job_scale.go and job_history.go.
var jobRoutes = []route{
	{method: "POST", path: "/v1/jobs", handler: (*Server).submitJob, verb: auth.VerbWrite, ws: wsBodyLate, object: "job",
		id: "submitJob", tag: "jobs", summary: "Validate and submit a job in the spec's workspace",
		request:   &payload{v: schemas.TrainingJob{}, media: specMedia},
		responses: []reply{{201, "the job, Pending", jsonBody(api.Job{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/jobs", handler: (*Server).listJobs, verb: auth.VerbRead, ws: wsPath, object: "job",
		id: "listJobs", tag: "jobs", summary: "List a workspace's jobs, newest first",
		query: listQuery(param{name: "phase", typ: "string", desc: "only jobs in this phase"},
			param{name: "framework", typ: "string", desc: "only jobs of this framework"}, labelParam),
		responses: []reply{{200, "a page of jobs", jsonBody(api.JobList{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/jobs/{name}", handler: (*Server).getJob, verb: auth.VerbRead, ws: wsPath, object: "job",
		id: "getJob", tag: "jobs", summary: "A job's spec and live status",
		query:     deletedJobParams,
		responses: []reply{{200, "the job", jsonBody(api.Job{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/stop", handler: (*Server).stopJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "stopJob", tag: "jobs", summary: "Stop a job; answers once it is terminal",
		request:   &payload{v: api.StopRequest{}, media: jsonMedia, optional: true},
		responses: []reply{{200, "the final phase", jsonBody(api.StopResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/scale", handler: (*Server).scaleJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "scaleJob", tag: "jobs", summary: "Set a running elastic job's replica count within spec.elastic; answers once the gang has it",
		request:   &payload{v: api.ScaleRequest{}, media: jsonMedia},
		responses: []reply{{200, "the replica count", jsonBody(api.ScaleResult{})}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/priority", handler: (*Server).setJobPriority, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "setJobPriority", tag: "quota", summary: "Change the priority of a job in the quota, queued (it moves in the queue) or admitted (it orders preemption); 409 for a job the quota does not hold",
		request:   &payload{v: api.JobPriority{}, media: jsonMedia},
		responses: []reply{{200, "the priority set", jsonBody(api.JobPriority{})}}},
	{method: "DELETE", path: "/v1/workspaces/{ws}/jobs/{name}", handler: (*Server).deleteJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "deleteJob", tag: "jobs", summary: "Stop a job if it runs, wait for its cleanup, then delete it (its record, events and logs stay readable by uid unless purge)",
		query:     []param{{name: "purge", typ: "boolean", desc: "remove everything: the workflow history, events, log records and log archive"}},
		responses: []reply{{204, "deleted", nil}}},
	{method: "POST", path: "/v1/workspaces/{ws}/jobs/{name}/clone", handler: (*Server).cloneJob, verb: auth.VerbWrite, ws: wsPath, object: "job",
		id: "cloneJob", tag: "jobs", summary: "Start a new job from this one's spec with overrides (JSON merge patch)",
		request:   jsonBody(api.CloneRequest{}),
		responses: []reply{{201, "the new job", jsonBody(api.Job{})}}},
	{method: "GET", path: "/v1/workspaces/{ws}/jobs/{name}/logs", stream: (*Server).jobLogs, verb: auth.VerbRead, ws: wsPath, object: "job",
		id: "jobLogs", tag: "jobs", summary: "A job's log records as JSON lines, from JetStream",
		query: []param{
			{name: "follow", typ: "boolean", desc: "stream until the job is terminal and drained"},
			{name: "replica", typ: "string", desc: "only this replica, such as worker-0"},
			deletedJobParams[0], deletedJobParams[1],
		},
		responses: []reply{{200, "log records, one JSON object per line", &payload{v: events.LogRecord{}, media: ndjson}}}},
}
