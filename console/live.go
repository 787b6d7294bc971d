package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
)

// liveSince is how far back a live stream starts: what happened between a page's
// rendering and its stream's start is not missed.
const liveSince = 30 * time.Second

// sse writes server-sent events.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

// startSSE answers 200 with an event stream and a first comment, so that the browser
// sees the stream open at once.
func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w}
	s.f, _ = w.(http.Flusher)
	_, _ = fmt.Fprint(w, ": open\n\n")
	s.flush()
	return s
}

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

// send writes one event of a type with data encoded as JSON.
func (s *sse) send(event string, data any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b); err != nil {
		return err
	}
	s.flush()
	return nil
}

// liveEvent is what the pages' scripts get of a job event.
type liveEvent struct {
	Job   string `json:"job"`
	Phase string `json:"phase,omitempty"`
}

// lazySSE starts the event stream on its first event: until then a refusal of the
// API can still be answered as an error (which an EventSource does not retry).
type lazySSE struct {
	w   http.ResponseWriter
	out *sse
}

func (l *lazySSE) send(event string, data any) error {
	if l.out == nil {
		l.out = startSSE(l.w)
	}
	return l.out.send(event, data)
}

// streamEvents sends the events o selects as "phase" and "metric" events until the
// browser goes away. A refusal of the API (another workspace's path) is its error.
func (c *Console) streamEvents(w http.ResponseWriter, r *http.Request, k *call, o client.EventOptions) error {
	o.Since, o.Follow = liveSince, true
	out := &lazySSE{w: w}
	err := k.api.Events(r.Context(), k.ws, o, func(ev events.Event) error {
		switch ev.Type {
		case events.TypeJobPhase:
			var d events.JobPhaseData
			if json.Unmarshal(ev.Data, &d) != nil {
				return nil //nolint:nilerr // unreadable: skip it
			}
			return out.send("phase", liveEvent{Job: d.Job, Phase: d.Phase})
		case events.TypeJobMetric:
			var d events.MetricData
			if json.Unmarshal(ev.Data, &d) != nil {
				return nil //nolint:nilerr // unreadable: skip it
			}
			return out.send("metric", liveEvent{Job: d.Job})
		case events.TypeJobResources:
			// A resource sample redraws the charts as a metric report does.
			var d events.ResourceData
			if json.Unmarshal(ev.Data, &d) != nil {
				return nil //nolint:nilerr // unreadable: skip it
			}
			return out.send("metric", liveEvent{Job: d.Job})
		}
		return nil
	})
	if out.out == nil {
		return err
	}
	return nil
}

// liveJobs streams the workspace's job phase changes, for the jobs page.
func (c *Console) liveJobs(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.streamEvents(w, r, k, client.EventOptions{Type: events.TypeJobPhase})
}

// liveJob streams one job's phase changes and metric reports, for its page.
func (c *Console) liveJob(w http.ResponseWriter, r *http.Request, k *call) error {
	return c.streamEvents(w, r, k, client.EventOptions{Job: r.PathValue("name")})
}

// logLine is what the job page's script gets of a log record.
type logLine struct {
	Replica string    `json:"replica"`
	Attempt int       `json:"attempt"`
	Stream  string    `json:"stream"`
	Time    time.Time `json:"time"`
	Line    string    `json:"line"`
}

// liveLogs streams a job's log lines (one replica's with replica=role-index) as "log"
// events, following them until the job is terminal and every line was sent; then an
// "end" event tells the page not to reconnect.
func (c *Console) liveLogs(w http.ResponseWriter, r *http.Request, k *call) error {
	out := &lazySSE{w: w}
	err := k.api.Logs(r.Context(), k.ws, r.PathValue("name"), client.LogOptions{Follow: true, Replica: r.URL.Query().Get("replica")},
		func(rec events.LogRecord) error {
			return out.send("log", logLine{Replica: fmt.Sprintf("%s-%d", rec.Role, rec.Index), Attempt: rec.Attempt,
				Stream: rec.Stream, Time: rec.Time, Line: rec.Line})
		})
	if out.out == nil && err != nil {
		return err
	}
	if r.Context().Err() == nil {
		_ = out.send("end", map[string]string{})
	}
	return nil
}
