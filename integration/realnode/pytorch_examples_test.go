package realnode

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// The PyTorch experiment examples (examples/pytorch/experiment.yaml and pbt.yaml) ask 1
// CPU per replica: 6 and 8 CPUs at once, and the two real nodes have 4. In containers
// each replica asks 400m instead (a request is only what the scheduler reserves; the
// program, its arguments and the experiment are the example's own), so that every gang
// of a round fits at once: without a gang scheduler, gangs that together exceed the
// nodes can each get part of their pods placed and wait for each other.
var smallReplicas = [2]string{`resources: {cpu: "1", memory: 1Gi}`, `resources: {cpu: 400m, memory: 1Gi}`}

// waitExperiment waits for an experiment to end and returns it.
func waitExperiment(t *testing.T, ws, name string, within time.Duration) *api.ExperimentDetail {
	t.Helper()
	ctx := itest.Context(t, within)
	var e *api.ExperimentDetail
	testutil.Eventually(t, itest.Left(ctx), "experiment "+name+" ends", func() bool {
		var err error
		e, err = env.api.GetExperiment(ctx, ws, name)
		return err == nil && e.Status.Phase.Terminal()
	}, itest.PollInterval)
	return e
}

// examples/pytorch/experiment.yaml in containers: a grid of 4 trials of the DDP program
// (1 master + 2 workers of gloo, rendezvous by the master's DNS name), 2 at a time, with
// ASHA stopping the worse half at its rungs. Every trial's gang really ran (its first
// all-reduce is right on all 3 ranks), a completed trial trained to step 20 with every
// rank holding the same parameters, at least one trial was pruned at a rung, and the
// best value is the loss the best trial's job printed at its end. The example orders its
// grid so that the last trial is the worst at both rungs (its comment gives the losses):
// ASHA stops it whatever the order in which the first three trials' reports arrive.
func TestPyTorchExperimentExampleInContainers(t *testing.T) {
	ctx := itest.Context(t, 12*time.Minute)
	const ws, name = "rn-torch-tune", "tune-torch-ddp"
	if _, err := env.api.CreateExperiment(ctx, []byte(inContainers(t, "pytorch/experiment.yaml", ws, smallReplicas))); err != nil {
		t.Fatal(err)
	}
	st := waitExperiment(t, ws, name, 11*time.Minute).Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != 4 || st.Failed != 0 || st.BestTrial == nil || st.BestValue == nil {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d pruned, %d failed", st.Phase, st.Message,
			len(st.Trials), st.Completed, st.Pruned, st.Failed)
	}
	if st.Pruned < 1 || st.Trials[3].Phase != schemas.TrialPruned {
		t.Errorf("ASHA pruned no trial: %+v (the last trial, the worst at both rungs, must be one)", st.Trials)
	}
	for _, tr := range st.Trials {
		run := ddpRuns(jobLogs(t, ctx, ws, tr.Job))[0]
		if run == nil || len(run.steps) == 0 {
			t.Errorf("trial %d (%s): no metric lines from its pods", tr.ID, tr.Job)
			continue
		}
		last := run.steps[len(run.steps)-1]
		t.Logf("trial %d %v: %s at step %d (%s); its job reported up to step %d, loss %.4f",
			tr.ID, tr.Params, tr.Phase, tr.Step, tr.Message, last, run.losses[len(run.losses)-1])
		if len(run.allReduce) != 3 {
			t.Errorf("trial %d: first all-reduce printed by %d ranks, want 3: %v", tr.ID, len(run.allReduce), run.allReduce)
		}
		switch tr.Phase {
		case schemas.TrialPruned:
			if tr.Step >= 20 || !strings.Contains(tr.Message, "asha") {
				t.Errorf("pruned trial %d: at step %d (%q), want a rung before step 20 named by rule asha", tr.ID, tr.Step, tr.Message)
			}
		case schemas.TrialCompleted:
			for _, w := range collectivesRight(run, 3) {
				t.Errorf("trial %d: %s", tr.ID, w)
			}
			if last != 20 || run.finalStep != 20 {
				t.Errorf("completed trial %d ended at step %d (final line at %d), want 20", tr.ID, last, run.finalStep)
			}
		}
	}
	best := st.Trials[*st.BestTrial]
	bestRun := ddpRuns(jobLogs(t, ctx, ws, best.Job))[0]
	if best.Phase != schemas.TrialCompleted || bestRun == nil || bestRun.final != *st.BestValue {
		t.Errorf("best trial %d (%s): the experiment says loss %v, its job printed %+v", best.ID, best.Phase, *st.BestValue, bestRun)
	}
	t.Logf("%d completed, %d pruned; best trial %d %v loss %.4f", st.Completed, st.Pruned, best.ID, best.Params, *st.BestValue)
}

// examples/pytorch/pbt.yaml in containers: 4 members of the DDP program (1 master + 1
// worker each) for 4 generations of 5 steps, 16 trials. Rank 0 of each trial saves
// model, optimizer and RNG with opendlc.torch to the stack's S3 from inside its pod at
// its generation's end; every trial of a later generation loads exactly the checkpoint
// its lineage names (its own member's or, when exploited, its donor's) and says so, and
// an exploited trial ran with the parameters explore derived from its donor's.
func TestPyTorchPBTExampleInContainers(t *testing.T) {
	ctx := itest.Context(t, 16*time.Minute)
	const ws, name, pop, gens, interval = "rn-torch-pbt", "pbt-torch-ddp", 4, 4, 5
	if _, err := env.api.CreateExperiment(ctx, []byte(inContainers(t, "pytorch/pbt.yaml", ws, smallReplicas))); err != nil {
		t.Fatal(err)
	}
	st := waitExperiment(t, ws, name, 15*time.Minute).Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != pop*gens || st.Completed != pop*gens {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d failed", st.Phase, st.Message, len(st.Trials), st.Completed, st.Failed)
	}
	lastCkpt := map[int]string{}
	for _, tr := range st.Trials {
		j, err := env.api.GetJob(ctx, ws, tr.Job)
		if err != nil {
			t.Fatal(err)
		}
		lastCkpt[tr.ID] = j.Status.LastCheckpoint
	}
	exploits := 0
	for _, tr := range st.Trials {
		l := tr.PBT
		if l == nil || l.Member != tr.ID%pop || l.Generation != tr.ID/pop || l.StopAtStep != int64(l.Generation+1)*interval {
			t.Fatalf("trial %d: lineage %+v", tr.ID, l)
		}
		run := ddpRuns(jobLogs(t, ctx, ws, tr.Job))[0]
		if run == nil || len(run.steps) == 0 {
			t.Fatalf("trial %d (%s): no output of the torch program", tr.ID, tr.Job)
		}
		for _, w := range collectivesRight(run, 2) {
			t.Errorf("trial %d: %s", tr.ID, w)
		}
		if last := run.steps[len(run.steps)-1]; last != l.StopAtStep || run.finalStep != l.StopAtStep {
			t.Errorf("trial %d: the program reported up to step %d (final step %d), want its generation's end %d", tr.ID, last, run.finalStep, l.StopAtStep)
		}
		if uri, step, err := checkpoint.ParseRef(lastCkpt[tr.ID]); err != nil || step != l.StopAtStep || !strings.HasSuffix(uri, "/"+tr.Job) {
			t.Errorf("trial %d: last checkpoint %q (%v), want one of job %s at step %d", tr.ID, lastCkpt[tr.ID], err, tr.Job, l.StopAtStep)
		}
		if l.Generation == 0 {
			if run.resumed != "" || l.ResumeFrom != "" {
				t.Errorf("trial %d of the first generation resumed (%q, lineage %q)", tr.ID, run.resumed, l.ResumeFrom)
			}
			continue
		}
		from := tr.ID - pop // the member's own previous trial
		if l.Donor != nil {
			from = *l.Donor
		}
		want := fmt.Sprintf("%s %d", lastCkpt[from], l.StopAtStep-interval)
		if l.ResumeFrom != lastCkpt[from] || run.resumed != want {
			t.Errorf("trial %d: its pod resumed from %q (lineage %q), want %q: trial %d's newest checkpoint", tr.ID, run.resumed, l.ResumeFrom, want, from)
		}
		if l.Donor == nil {
			continue
		}
		exploits++
		j, err := env.api.GetJob(ctx, ws, tr.Job)
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Join(j.Spec.Spec.Args, " ")
		if lr := fmt.Sprint(tr.Params["lr"]); !strings.Contains(args, "--lr "+lr) || fmt.Sprint(l.ParamsBefore) != fmt.Sprint(st.Trials[from].Params) {
			t.Errorf("trial %d: args %q, params %v, before explore %v, donor %d's %v", tr.ID, args, tr.Params, l.ParamsBefore, from, st.Trials[from].Params)
		}
	}
	// quantileFraction 0.25 of 4 members: one member is replaced in each generation
	// after the first.
	if exploits != gens-1 {
		t.Errorf("%d trials exploited a better member, want %d", exploits, gens-1)
	}
	t.Logf("%d trials, %d exploits; best trial %d loss %.4f %v", len(st.Trials), exploits, *st.BestTrial, *st.BestValue, st.BestParams)
}
