package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// pbtSpec is examples/experiment/pbt.yaml for the test: the built trainer, workspace
// ws, 3 generations of 2 epochs that sleep so that a worker can be killed mid-way.
func pbtSpec(t *testing.T, ws, name string) string {
	t.Helper()
	data, err := os.ReadFile("../examples/experiment/pbt.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec := string(data)
	for _, r := range [][2]string{
		{"command: [go, run, ./examples/trainer]", fmt.Sprintf("command: [%q]", env.trainer)},
		{"metadata: {name: pbt-logreg, workspace: default,", fmt.Sprintf("metadata: {name: %s, workspace: %s,", name, ws)},
		{"maxTrials: 16", "maxTrials: 12"},
		{`args: [--epochs, "8",`, `args: [--epoch-sleep, 300ms, --epochs, "6",`},
		{"s3://dlc/workspaces/default/checkpoints/pbt-logreg", "s3://dlc/workspaces/" + ws + "/checkpoints/" + name},
	} {
		if !strings.Contains(spec, r[0]) {
			t.Fatalf("pbt.yaml no longer contains %q", r[0])
		}
		spec = strings.Replace(spec, r[0], r[1], 1)
	}
	return spec
}

// A PBT experiment of the example trainer runs end to end through `dlc experiment
// create` on its own stack while its worker is SIGKILLed in the second generation and a
// new one carries on. It succeeds with 4 members × 3 generations; every trial after the
// first generation resumed from a checkpoint (its first report is the epoch after the
// one its generation started at, and its checkpoint's step goes on from there) and
// stopped at its generation's end; each generation
// replaced its bottom member with a copy of a top one; and the lineage in the status is
// exactly what hpo.PBTNext decides from the seed and the recorded results (values,
// parameters and the jobs' last checkpoints), so the decisions are a pure function of
// them whatever the crash.
func TestExperimentPBTSurvivesWorkerKill(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e, stateDir, worker := workerStack(t, ctx)
	ws, name := "pbt", "pbt-logreg"
	c := itest.AdminClient(t, e)
	bin := dlcBinary(t)
	path := filepath.Join(t.TempDir(), name+".yaml")
	writeFile(t, path, pbtSpec(t, ws, name))
	dlcCmd := itest.CLI{Bin: bin, Server: e.APIURL, Token: e.AdminToken, Workspace: ws}.Runner(ctx)
	if out, err := dlcCmd("experiment", "create", "-f", path); err != nil {
		t.Fatalf("dlc experiment create: %v\n%s", err, out)
	}

	// Kill the worker once the second generation runs.
	var at *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), "the experiment to reach its second generation", func() error {
		x, err := c.GetExperiment(ctx, ws, name)
		if err != nil {
			return err
		}
		if len(x.Status.Trials) <= 4 || x.Status.Running == 0 {
			return fmt.Errorf("status %+v", x.Status)
		}
		at = x
		return nil
	}, itest.PollInterval)
	worker.kill()
	if worker.cmd.ProcessState == nil || worker.cmd.ProcessState.Success() {
		t.Fatalf("the worker was not killed: %v", worker.cmd.ProcessState)
	}
	t.Logf("worker killed with %d trials started, %d running, %d completed (%s)", len(at.Status.Trials), at.Status.Running,
		at.Status.Completed, worker.cmd.ProcessState)
	startWorker(t, e, stateDir)

	x := waitExperiment(t, ctx, c, ws, name)
	st := x.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 12 || st.Completed != 12 || st.BestValue == nil {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d failed", st.Phase, st.Message, len(st.Trials), st.Completed, st.Failed)
	}
	if out, err := dlcCmd("experiment", "get", name); err != nil || !strings.Contains(out, "Succeeded") {
		t.Errorf("dlc experiment get: %v\n%s", err, out)
	}

	const pop, interval = 4, 2
	spec := x.Spec.Spec
	space := workflows.SearchSpaceOf(spec.SearchSpace)
	floats := func(p map[string]any) map[string]float64 {
		out := map[string]float64{}
		for k, v := range p {
			out[k] = v.(float64)
		}
		return out
	}
	checkpoints := map[int]string{}
	steps := map[int]int64{}
	for _, tr := range st.Trials {
		j, err := c.GetJob(ctx, ws, tr.Job)
		if err != nil {
			t.Fatal(err)
		}
		checkpoints[tr.ID] = j.Status.LastCheckpoint
		l := tr.PBT
		if l == nil || l.Member != tr.ID%pop || l.Generation != tr.ID/pop || l.StopAtStep != int64(l.Generation+1)*interval {
			t.Fatalf("trial %d: lineage %+v", tr.ID, l)
		}
		if len(tr.Reports) == 0 || tr.Reports[len(tr.Reports)-1].Step != l.StopAtStep || tr.Reports[0].Step != l.StopAtStep-interval+1 {
			t.Errorf("trial %d (generation %d): reports %v, want epochs %d to %d", tr.ID, l.Generation, tr.Reports, l.StopAtStep-interval+1, l.StopAtStep)
		}
		// The trainer numbers its checkpoints by optimiser step, the same number per
		// epoch: a trial resumed at its generation's start ends at (generation+1) times
		// the first generation's step.
		uri, step, err := checkpoint.ParseRef(checkpoints[tr.ID])
		if err != nil || !strings.HasSuffix(uri, "/"+tr.Job) {
			t.Errorf("trial %d: last checkpoint %q (%v), want one of job %s", tr.ID, checkpoints[tr.ID], err, tr.Job)
		}
		steps[tr.ID] = step
		if first := steps[tr.ID%pop]; step != int64(l.Generation+1)*first {
			t.Errorf("trial %d (generation %d): checkpoint at step %d, want %d × %d", tr.ID, l.Generation, step, l.Generation+1, first)
		}
	}
	exploits := 0
	for gen := 1; gen < 3; gen++ {
		prev := make([]hpo.PBTMember, pop)
		for m := range pop {
			tr := st.Trials[(gen-1)*pop+m]
			prev[m] = hpo.PBTMember{Trial: tr.ID, Params: floats(tr.Params), Value: tr.Value, Checkpoint: checkpoints[tr.ID]}
		}
		want, err := hpo.PBTNext(space, hpo.Maximize, hpo.DefaultPBTConfig(), st.Seed, gen, prev)
		if err != nil {
			t.Fatal(err)
		}
		for m, d := range want {
			tr := st.Trials[gen*pop+m]
			l := tr.PBT
			donor := -1
			if l.Donor != nil {
				donor = *l.Donor
				exploits++
				t.Logf("generation %d: member %d (trial %d) copied trial %d (%s): %v -> %v (%v)", gen, m, tr.ID, donor, l.ResumeFrom, l.ParamsBefore, tr.Params, l.Explore)
			}
			got := fmt.Sprint(donor, l.ResumeFrom, tr.Params, *l.Parent)
			wantS := fmt.Sprint(d.Donor, d.ResumeFrom, workflows.ParamValuesOf(spec.SearchSpace, d.Params), (gen-1)*pop+m)
			if got != wantS {
				t.Errorf("trial %d: donor, checkpoint, params, parent %s; hpo.PBTNext says %s", tr.ID, got, wantS)
			}
			if d.Donor >= 0 && !cmp.Equal(l.ParamsBefore, st.Trials[d.Donor].Params) {
				t.Errorf("trial %d: params before %v, want the donor's %v", tr.ID, l.ParamsBefore, st.Trials[d.Donor].Params)
			}
		}
	}
	if exploits != 2 {
		t.Errorf("%d exploits in 2 generations of 4 with quantile 0.25, want 2", exploits)
	}
	t.Logf("best trial %d accuracy %.3f %v", *st.BestTrial, *st.BestValue, st.BestParams)
}
