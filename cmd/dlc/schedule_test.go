package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/schemas"
)

func TestParseBackfillTime(t *testing.T) {
	now := time.Date(2026, 6, 3, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		in      string
		want    time.Time
		wantErr bool
	}{
		"rfc3339":  {in: "2026-01-02T02:00:00+08:00", want: time.Date(2026, 1, 1, 18, 0, 0, 0, time.UTC)},
		"date":     {in: "2026-01-02", want: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		"now":      {in: "now", want: now},
		"relative": {in: "-48h", want: now.Add(-48 * time.Hour)},
		"garbage":  {in: "yesterday", wantErr: true},
		"bad rel":  {in: "-2 days", wantErr: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseBackfillTime(tt.in, now)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if !tt.wantErr && !got.Equal(tt.want) {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// get shows the next fire times in the schedule's zone and the history newest first.
func TestPrintSchedule(t *testing.T) {
	started := time.Date(2026, 6, 1, 18, 3, 0, 0, time.UTC)
	s := &api.ScheduleView{
		Spec: schemas.Schedule{Metadata: schemas.ObjectMeta{Name: "nightly", Workspace: "ml"},
			Spec: schemas.ScheduleSpec{Cron: "0 2 * * *", TimeZone: "Asia/Shanghai", OverlapPolicy: "skip",
				Action: schemas.ScheduleAction{PipelineTemplate: &schemas.PipelineTemplate{}}}},
		Status: schemas.ScheduleStatus{
			Next: []schemas.ScheduledTime{{NominalTime: time.Date(2026, 6, 2, 18, 0, 0, 0, time.UTC), FireTime: time.Date(2026, 6, 2, 18, 3, 0, 0, time.UTC)}},
			History: []schemas.ScheduleRun{
				{NominalTime: time.Date(2026, 5, 31, 18, 0, 0, 0, time.UTC), Trigger: "Schedule", Outcome: "NoNewData"},
				{NominalTime: time.Date(2026, 6, 1, 18, 0, 0, 0, time.UTC), Trigger: "Schedule", Job: "nightly-202606011800",
					StartTime: &started, Outcome: "Succeeded"},
				{NominalTime: time.Date(2026, 6, 2, 18, 0, 0, 0, time.UTC), Trigger: "Trigger", Kind: schemas.KindPipeline,
					Job: "nightly-202606021800", StartTime: &started, Outcome: "Running"},
			},
			Counts: schemas.ScheduleCounts{Started: 1, NoNewData: 1},
		},
	}
	out := printed(t, func(w io.Writer) error { return printSchedule(w, "table", s) },
		"Time zone:     Asia/Shanghai",
		"2026-06-03 02:00:00 CST  2026-06-03 02:03:00 CST",
		"1 started, 0 skipped, 0 missed, 1 without new data",
		"Action:        Pipeline",
	)
	var rows []string
	for l := range strings.SplitSeq(out, "\n") {
		if strings.Contains(l, "Succeeded") || strings.Contains(l, "NoNewData") || strings.Contains(l, "Running") {
			f := strings.Fields(l)
			rows = append(rows, strings.Join(f[len(f)-3:], " "))
		}
	}
	// Newest first, each with the kind of what it started (a run without one is a job).
	want := []string{
		"Pipeline nightly-202606021800 Running",
		"TrainingJob nightly-202606011800 Succeeded",
		"TrainingJob - NoNewData",
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("history rows, last three columns (-want +got):\n%s\n%s", diff, out)
	}
}
