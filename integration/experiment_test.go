package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// tuneSpec is examples/experiment/tune.yaml with the built trainer as its command (and
// extra trainer flags), in workspace ws, named name, changed by the replacements.
func tuneSpec(t *testing.T, ws, name string, extraArgs []string, replace ...string) string {
	t.Helper()
	data, err := os.ReadFile("../examples/experiment/tune.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(data)
	args := ""
	var argsSb38 strings.Builder
	for _, a := range extraArgs {
		argsSb38.WriteString(fmt.Sprintf(", %q", a))
	}
	args += argsSb38.String()
	pairs := append([]string{
		"command: [go, run, ./examples/trainer]", fmt.Sprintf("command: [%q]", env.trainer),
		"metadata: {name: tune-logreg, workspace: default,", fmt.Sprintf("metadata: {name: %s, workspace: %s,", name, ws),
		`--batch-size, "${params.batch_size}"]`, `--batch-size, "${params.batch_size}"` + args + "]",
	}, replace...)
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(spec, pairs[i]) {
			t.Fatalf("tune.yaml no longer contains %q", pairs[i])
		}
		spec = strings.Replace(spec, pairs[i], pairs[i+1], 1)
	}
	return spec
}

// waitExperiment polls an experiment until it has ended.
func waitExperiment(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) *api.ExperimentDetail {
	t.Helper()
	var last *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), fmt.Sprintf("experiment %s/%s to end", ws, name), func() error {
		x, err := c.GetExperiment(ctx, ws, name)
		if err != nil {
			return err
		}
		if last = x; !x.Status.Phase.Terminal() && x.Status.Phase != schemas.ExperimentStopped {
			return fmt.Errorf("status %+v", x.Status)
		}
		return nil
	}, 200*time.Millisecond)
	return last
}

// checkTrialEvents checks that the experiment has exactly want trial events in
// JetStream, none published twice.
func checkTrialEvents(t *testing.T, ctx context.Context, js *jetstream.Client, ws, name string, want int) {
	t.Helper()
	ids, evs := trialEvents(t, ctx, js, ws, name)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Errorf("trial event %s published twice", id)
		}
		seen[id] = true
	}
	if len(evs) != want {
		t.Errorf("%d trial events, want %d", len(evs), want)
	}
}

// trialEvents reads an experiment's trial events back from JetStream.
func trialEvents(t *testing.T, ctx context.Context, js *jetstream.Client, ws, name string) ([]string, []events.TrialData) {
	t.Helper()
	evs, out := streamEvents[events.TrialData](t, ctx, js, events.ExperimentTrialSubject(ws, name))
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids, out
}

// lastAccuracy is the last accuracy a job's rank 0 reported.
func lastAccuracy(t *testing.T, ctx context.Context, c *dlc.Client, ws, name string) float64 {
	t.Helper()
	acc := -1.0
	err := c.Logs(ctx, ws, name, dlc.LogOptions{}, func(r events.LogRecord) error {
		if vals, ok := events.ParseMetricLine(r.Line); ok {
			if v, ok := vals["accuracy"]; ok {
				acc = v
			}
		}
		return nil
	})
	if err != nil || acc < 0 {
		t.Fatalf("no accuracy in the logs of %s (err %v)", name, err)
	}
	return acc
}

// The example experiment (16 trials, 4 at a time, TPE with ASHA) runs the real trainer
// through the dlc binary and finds parameters that beat the trainer's defaults, run as
// a job in the same test; get, list and plot work; every trial ran as a labelled job and
// published its events once.
func TestExperimentTunesTheExampleTrainer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ws := workspace(t)
	c := itest.AdminClient(t, env.e)
	bin := dlcBinary(t)
	dir := t.TempDir()
	run := itest.CLI{Bin: bin, Server: env.e.APIURL, Token: env.e.AdminToken, Workspace: ws, Dir: dir}.Runner(ctx)

	// The baseline: the trainer with its default parameters.
	if _, err := c.SubmitJob(ctx, []byte(itest.JobDoc("defaults", ws, fmt.Sprintf(`
  framework: custom
  command: [%q]
  roles: {worker: {replicas: 1}}
`, env.trainer)))); err != nil {
		t.Fatal(err)
	}
	if j := itest.WaitJob(t, ctx, c, ws, "defaults", "terminal", func(j *api.Job) bool { return j.Status.Phase.Terminal() }); j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("baseline job %s: %s", j.Status.Phase, j.Status.Message)
	}
	baseline := lastAccuracy(t, ctx, c, ws, "defaults")

	name := "tune-logreg"
	spec := filepath.Join(dir, "tune.yaml")
	writeFile(t, spec, tuneSpec(t, ws, name, nil))
	start := time.Now()
	out, err := run("experiment", "create", "-f", spec, "--wait")
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("dlc experiment create --wait: %v\n%s", err, out)
	}
	for _, want := range []string{"experiment " + ws + "/" + name + " created", "Phase:       Succeeded", "Best:        trial ", "TRIAL  JOB"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	e, err := c.GetExperiment(ctx, ws, name)
	if err != nil {
		t.Fatal(err)
	}
	st := e.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 16 || st.Completed+st.Pruned != 16 || st.BestValue == nil {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d pruned, %d failed", st.Phase, st.Message,
			len(st.Trials), st.Completed, st.Pruned, st.Failed)
	}
	t.Logf("16 trials in %s: %d completed, %d pruned; best trial %d accuracy %.3f %v; defaults %.3f",
		elapsed.Round(time.Second), st.Completed, st.Pruned, *st.BestTrial, *st.BestValue, st.BestParams, baseline)
	if *st.BestValue <= baseline {
		t.Errorf("best accuracy %.4f does not beat the defaults' %.4f", *st.BestValue, baseline)
	}
	// The best trial's job really reported that accuracy.
	if got := lastAccuracy(t, ctx, c, ws, st.Trials[*st.BestTrial].Job); got != *st.BestValue {
		t.Errorf("best trial's job reported %v, status says %v", got, *st.BestValue)
	}

	// Every trial ran as one job labelled with the experiment and its number.
	jobs, err := c.ListJobs(ctx, ws, dlc.ListOptions{Labels: []string{"experiment=" + name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 16 {
		t.Errorf("%d jobs labelled experiment=%s, want 16", len(jobs.Items), name)
	}
	for _, tr := range st.Trials {
		j, err := c.GetJob(ctx, ws, tr.Job)
		if err != nil {
			t.Errorf("trial %d: job %s: %v", tr.ID, tr.Job, err)
			continue
		}
		if j.Spec.Metadata.Labels["trial"] != strconv.Itoa(tr.ID) || !j.Status.Phase.Terminal() {
			t.Errorf("trial %d: job %s labels %v phase %s", tr.ID, tr.Job, j.Spec.Metadata.Labels, j.Status.Phase)
		}
		if tr.Phase == schemas.TrialCompleted && j.Status.Phase != schemas.JobSucceeded {
			t.Errorf("completed trial %d: job %s", tr.ID, j.Status.Phase)
		}
	}

	// Two events per trial (Running, then Completed or Pruned), each once.
	checkTrialEvents(t, ctx, env.events, ws, name, 32)

	// get, list and plot through the CLI.
	out, err = run("experiment", "get", name)
	if err != nil || !strings.Contains(out, fmt.Sprintf("Best:        trial %d,", *st.BestTrial)) {
		t.Errorf("experiment get: %v\n%s", err, out)
	}
	out, err = run("experiment", "list")
	if err != nil || !strings.Contains(out, name) || !strings.Contains(out, "Succeeded") {
		t.Errorf("experiment list: %v\n%s", err, out)
	}
	svg := filepath.Join(dir, "tune.svg")
	if out, err := run("experiment", "plot", name, "-o", svg); err != nil {
		t.Errorf("experiment plot: %v\n%s", err, out)
	}
	if data, err := os.ReadFile(svg); err != nil || strings.Count(string(data), `class="panel"`) != 4 ||
		strings.Count(string(data), `class="trial `) != 4*16 {
		t.Errorf("plot: %v, %d panels, %d points", err, strings.Count(string(data), `class="panel"`), strings.Count(string(data), `class="trial `))
	}
	// A finished experiment cannot be resumed or extended; stop answers its phase.
	if _, err := c.ExtendExperiment(ctx, ws, name, 20); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Errorf("extend of a finished experiment: %v", err)
	}
	if r, err := c.StopExperiment(ctx, ws, name, ""); err != nil || r.Phase != schemas.ExperimentSucceeded {
		t.Errorf("stop of a finished experiment: %+v, %v", r, err)
	}
	recordHistory(t, ctx, workflows.ExperimentWorkflowID(ws, name), "experiment_tune_succeeded.json")
}

// An experiment whose worker is SIGKILLed and whose Temporal server is restarted
// mid-way keeps the trials it had: every trial known at the interruption has the same
// parameters afterwards, and every one that had finished the same outcome and value
// (its suggestions and decisions are recorded in its history, so the recovery rebuilds
// them); it then runs to its end with no trial job run twice.
func TestExperimentSurvivesWorkerKillAndTemporalRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	// The experiment has its own stack, so that its worker can be killed and its
	// Temporal restarted.
	e, stateDir, worker := workerStack(t, ctx)

	ws := "hpo-crash"
	// 8 trials, 2 at a time, TPE from the third trial on, ASHA; each epoch sleeps so that
	// the experiment is mid-way when it is interrupted.
	spec := func(name string) string {
		return tuneSpec(t, ws, name, []string{"--epoch-sleep", "300ms"},
			"maxTrials: 16", "maxTrials: 8",
			"parallelism: 4", "parallelism: 2",
			"startupTrials: 4", "startupTrials: 2",
			`args: [--epochs, "10",`, `args: [--epochs, "6",`,
			"maxResource: 10", "maxResource: 6")
	}
	crashAPI := itest.AdminClient(t, e)
	if _, err := crashAPI.CreateExperiment(ctx, []byte(spec("crashy"))); err != nil {
		t.Fatal(err)
	}

	// Interrupt once two trials have finished and others run.
	var before *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), "the experiment to get mid-way (2 trials finished, others running)", func() error {
		x, err := crashAPI.GetExperiment(ctx, ws, "crashy")
		if err != nil {
			return err
		}
		if x.Status.Completed+x.Status.Pruned < 2 || x.Status.Running == 0 {
			return fmt.Errorf("status %+v", x.Status)
		}
		before = x
		return nil
	}, itest.PollInterval)
	t.Logf("interrupting at %d finished, %d running trials", before.Status.Completed+before.Status.Pruned, before.Status.Running)
	worker.kill()
	_, port, err := net.SplitHostPort(e.Stack.Temporal.Address)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	if err := e.Stack.Temporal.Close(); err != nil {
		t.Fatal(err)
	}
	restartedAt := time.Now()
	restarted, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{
		Dir: filepath.Join(e.Dir, "temporal"), Port: p, Namespace: e.Stack.Temporal.Namespace,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.Stack.Temporal = restarted
	t.Logf("worker killed, Temporal restarted in %s", time.Since(restartedAt).Round(time.Millisecond))
	startWorker(t, e, stateDir)

	crashy := waitExperiment(t, ctx, crashAPI, ws, "crashy")
	if x := crashy; x.Status.Phase != schemas.ExperimentSucceeded || len(x.Status.Trials) != 8 || x.Status.Failed != 0 {
		t.Fatalf("%s: %s (%s), %d trials, %d failed", x.Spec.Metadata.Name, x.Status.Phase, x.Status.Message,
			len(x.Status.Trials), x.Status.Failed)
	}
	for _, was := range before.Status.Trials {
		now := crashy.Status.Trials[was.ID]
		if diff := cmp.Diff(was.Params, now.Params); diff != "" {
			t.Errorf("trial %d: params (-before +after the interruption):\n%s", was.ID, diff)
		}
		if was.Phase.Final() && (now.Phase != was.Phase || !cmp.Equal(now.Value, was.Value) || now.Step != was.Step) {
			t.Errorf("trial %d: %s %v at step %d before the interruption, %s %v at step %d after", was.ID,
				was.Phase, was.Value, was.Step, now.Phase, now.Value, now.Step)
		}
	}
	t.Logf("%d trials known at the interruption kept; %d completed, %d pruned, best trial %d = %.3f", len(before.Status.Trials),
		crashy.Status.Completed, crashy.Status.Pruned, *crashy.Status.BestTrial, *crashy.Status.BestValue)

	// Each trial ran as exactly one job, and each trial event was published once.
	jobs, err := crashAPI.ListJobs(ctx, ws, dlc.ListOptions{Labels: []string{"experiment=crashy"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Items) != 8 {
		t.Errorf("%d trial jobs, want 8", len(jobs.Items))
	}
	for _, tr := range crashy.Status.Trials {
		if tr.Attempts != 1 {
			first := workflows.TrialJobName("crashy", tr.ID, 0)
			j, err := crashAPI.GetJob(ctx, ws, first)
			if err != nil {
				t.Errorf("trial %d ran %d jobs; %s: %v", tr.ID, tr.Attempts, first, err)
				continue
			}
			t.Errorf("trial %d ran %d jobs; %s ended %s/%s: %s; timeline %+v", tr.ID, tr.Attempts, first,
				j.Status.Phase, j.Status.Reason, j.Status.Message, j.Status.Timeline)
		}
	}
	js, err := jetstream.Connect(e.Stack.NATS.URL, e.Stack.NATS.ClientOptions(devstack.NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer js.Close()
	checkTrialEvents(t, ctx, js, ws, "crashy", 16)
}
