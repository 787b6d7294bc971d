package console

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/runs"
	"github.com/opendlc/opendlc/schemas"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"wsPath": wsPath,
	"age":    age,
	"since":  since,
	"span":   span,
	"when":   when,
	"lower":  strings.ToLower,
	"deref":  func(p *int32) int32 { return *p },
	"fval":   func(p *float64) string { return fmt.Sprintf("%.6g", *p) },
	"all":    func(ws string) bool { return ws == api.AllWorkspaces },
	// add3 is a parameter's column in the trials table (after trial, phase, value).
	"add3":    func(i int) int { return i + 3 },
	"runOf":   func(p page, run schemas.ScheduleRun) scheduleRun { return scheduleRun{WS: p.WS, Run: run} },
	"form":    func(p page, f docForm) formOf { return formOf{P: p, F: f} },
	"qjobOf":  func(p page, j api.QuotaJob) quotaJobRow { return quotaJobRow{WS: p.WS, P: p, J: j} },
	"deref64": func(p *int64) int64 { return *p },

	// runSpan is a run record's time from start to finish; empty for a run that never
	// started. attemptSpan is an attempt's.
	"runSpan": func(r runs.Record) string {
		if r.Started == nil {
			return ""
		}
		return brief(r.Finished.Sub(*r.Started))
	},
	"attemptSpan": func(a runs.Attempt) string {
		if a.End == nil {
			return ""
		}
		return brief(a.End.Sub(a.Start))
	},
}

// formOf is the argument of the docform template: the page and its form.
type formOf struct {
	P page
	F docForm
}

// quotaJobRow is one row of the workspace page's admitted jobs or queue: the page
// (for the queue's priority form) and the job.
type quotaJobRow struct {
	WS string
	P  page
	J  api.QuotaJob
}

// scheduleRun is one row of a schedule's runs.
type scheduleRun struct {
	WS  string
	Run schemas.ScheduleRun
}

// age is how long ago t was, briefly: 42s, 5m, 3h, 2d.
func age(now, t time.Time) string { return brief(now.Sub(t)) }

// since is age from a pointer; empty for nil.
func since(now time.Time, t *time.Time) string {
	if t == nil {
		return ""
	}
	return age(now, *t)
}

// span is the time from start to end (to now while end is nil).
func span(now time.Time, start time.Time, end *time.Time) string {
	if start.IsZero() {
		return ""
	}
	if end != nil {
		now = *end
	}
	return brief(now.Sub(start))
}

// when formats a time for a table: RFC 3339 in UTC; empty for nil or zero.
func when(t any) string {
	switch x := t.(type) {
	case time.Time:
		if x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339)
	case *time.Time:
		if x == nil || x.IsZero() {
			return ""
		}
		return x.UTC().Format(time.RFC3339)
	}
	return ""
}

// brief writes a duration in its largest unit: 42s, 5m, 3h, 2d (1m30s below 10m).
func brief(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
