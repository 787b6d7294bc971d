package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.temporal.io/sdk/testsuite"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/jstest"
)

// WatchTrialMetrics reads a trial job's objective from the metric events on a real
// JetStream: only the job run's (uid) reports that carry the metric, numbered by the
// step metric; a read resumes after the sequence it is given, so the same input reads
// the same reports; with Drain it returns what is stored at once.
func TestWatchTrialMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	js, _ := jstest.Start(t, ctx)
	n := 0
	metric := func(uid string, vals map[string]float64) {
		n++
		id := fmt.Sprintf("m%d", n)
		ev, err := events.New(id, events.TypeJobMetric, "ws", events.JobSource("ws", "tune-t0"), "tune-t0", time.Now(),
			events.MetricData{Job: "tune-t0", UID: uid, Replica: "tune-t0-worker-0-a0", Seq: int64(n), Values: vals})
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(ev)
		if err := js.Publish(ctx, events.Msg{Subject: events.JobMetricsSubject("ws", "tune-t0"), ID: id, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	metric("old-run", map[string]float64{"epoch": 1, "accuracy": 0.1}) // an earlier job of the same name
	metric("uid1", map[string]float64{"epoch": 1, "accuracy": 0.5, "loss": 0.7})
	metric("uid1", map[string]float64{"loss": 0.6}) // no objective
	metric("uid1", map[string]float64{"accuracy": 0.6})

	var env testsuite.WorkflowTestSuite
	aenv := env.NewTestActivityEnvironment()
	a := &activities.ExperimentActivities{Events: js, EventStream: jetstream.EventsStream, PollInterval: 100 * time.Millisecond}
	aenv.RegisterActivity(a.WatchTrialMetrics)
	watch := func(in activities.WatchTrialMetricsInput) activities.WatchTrialMetricsResult {
		t.Helper()
		v, err := aenv.ExecuteActivity(a.WatchTrialMetrics, in)
		if err != nil {
			t.Fatal(err)
		}
		var res activities.WatchTrialMetricsResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}
	step := func(s int64) *int64 { return &s }
	in := activities.WatchTrialMetricsInput{Workspace: "ws", Job: "tune-t0", UID: "uid1", Metric: "accuracy",
		StepMetric: "epoch", MaxWait: 5 * time.Second}
	first := watch(in)
	want := []activities.MetricReport{
		{Step: step(1), Value: 0.5, Replica: "tune-t0-worker-0-a0"},
		{Value: 0.6, Replica: "tune-t0-worker-0-a0"},
	}
	if diff := cmp.Diff(want, first.Reports); diff != "" {
		t.Errorf("reports (-want +got):\n%s", diff)
	}
	if again := watch(in); !cmp.Equal(first, again) {
		t.Errorf("the same read again gave %+v, want %+v", again, first)
	}

	// A weighted objective's metrics are returned as components, each report with its
	// step; the objective's own name is reported by no one.
	comps := watch(activities.WatchTrialMetricsInput{Workspace: "ws", Job: "tune-t0", UID: "uid1", Metric: "score",
		StepMetric: "epoch", MaxWait: 5 * time.Second, Components: []string{"loss", "accuracy"}})
	wantComps := []activities.MetricReport{
		{Metric: "loss", Step: step(1), Value: 0.7, Replica: "tune-t0-worker-0-a0"},
		{Metric: "accuracy", Step: step(1), Value: 0.5, Replica: "tune-t0-worker-0-a0"},
		{Metric: "loss", Value: 0.6, Replica: "tune-t0-worker-0-a0"},
		{Metric: "accuracy", Value: 0.6, Replica: "tune-t0-worker-0-a0"},
	}
	if diff := cmp.Diff(wantComps, comps.Components); diff != "" || len(comps.Reports) != 0 || comps.LastSeq != first.LastSeq {
		t.Errorf("components (-want +got):\n%s\nreports %v, last seq %d (want %d)", diff, comps.Reports, comps.LastSeq, first.LastSeq)
	}

	// Nothing new: a drain returns at once, a watch after MaxWait.
	in.AfterSeq = first.LastSeq
	in.Drain = true
	if res := watch(in); len(res.Reports) != 0 || res.LastSeq != first.LastSeq {
		t.Errorf("drain with nothing new: %+v", res)
	}
	in.Drain = false
	in.MaxWait = 300 * time.Millisecond
	start := time.Now()
	if res := watch(in); len(res.Reports) != 0 || time.Since(start) < 300*time.Millisecond {
		t.Errorf("watch with nothing new: %+v after %s", res, time.Since(start))
	}

	// A report that arrives while watching is returned.
	go func() {
		time.Sleep(300 * time.Millisecond)
		metric("uid1", map[string]float64{"epoch": 3, "accuracy": 0.7})
	}()
	in.MaxWait = 10 * time.Second
	res := watch(in)
	if diff := cmp.Diff([]activities.MetricReport{{Step: step(3), Value: 0.7, Replica: "tune-t0-worker-0-a0"}}, res.Reports); diff != "" {
		t.Errorf("report published while watching (-want +got):\n%s", diff)
	}

	// A drain reads everything stored, even more than one read delivers.
	for i := range 600 {
		metric("uid1", map[string]float64{"epoch": float64(10 + i), "accuracy": 0.8})
	}
	in.AfterSeq, in.Drain = res.LastSeq, true
	if got := watch(in); len(got.Reports) != 600 || *got.Reports[599].Step != 609 {
		t.Errorf("drain read %d reports, want 600", len(got.Reports))
	}
}
