package integration

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/schemas"
)

// examples/pytorch/pbt.yaml, the DDP program with the Python library, runs end to end
// through `dlc experiment create --wait` (the CLI binary) on the embedded stack, made
// small: a population of 3, 3 generations of 3 steps. It succeeds; every trial after
// the first generation is a real torch run that resumed (its rank 0 prints "resumed
// from <checkpoint> at step S") from exactly the checkpoint its lineage names, at the
// generation's start; an exploited trial resumed from its donor's newest checkpoint
// (written by the donor's job at that step) and explore changed its parameters from the
// donor's, which its job ran with; a member that was not replaced resumed from its own.
func TestPyTorchPBTExample(t *testing.T) {
	requireTorch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ws := workspace(t)
	const name, pop, gens, interval = "pbt-torch", 3, 3, 3
	spec := torchExample(t, "pbt.yaml",
		"metadata: {name: pbt-torch-ddp, workspace: default,", fmt.Sprintf("metadata: {name: %s, workspace: %s,", name, ws),
		"perturbationInterval: 5,", fmt.Sprintf("perturbationInterval: %d,", interval),
		"maxTrials: 16", fmt.Sprintf("maxTrials: %d", pop*gens),
		"parallelism: 4", fmt.Sprintf("parallelism: %d", pop),
		`args: [--steps, "20",`, fmt.Sprintf(`args: [--steps, "%d",`, gens*interval),
		"s3://dlc/workspaces/default/checkpoints/pbt-torch-ddp", "s3://dlc/workspaces/"+ws+"/checkpoints/"+name,
	)
	path := filepath.Join(t.TempDir(), name+".yaml")
	writeFile(t, path, spec)
	run := dlcRunner(t, ctx, ws)
	start := time.Now()
	out, err := run("experiment", "create", "-f", path, "--wait")
	if err != nil {
		t.Fatalf("dlc experiment create --wait: %v\n%s", err, out)
	}
	for _, want := range []string{"Phase:       Succeeded", "Algorithm:   pbt"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	x, err := env.api.GetExperiment(ctx, ws, name)
	if err != nil {
		t.Fatal(err)
	}
	st := x.Status
	if st.Phase != schemas.ExperimentSucceeded || len(st.Trials) != pop*gens || st.Completed != pop*gens {
		t.Fatalf("experiment %s (%s): %d trials, %d completed, %d failed", st.Phase, st.Message, len(st.Trials), st.Completed, st.Failed)
	}
	t.Logf("%d trials in %s", len(st.Trials), time.Since(start).Round(time.Second))

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
		torch := ddpOutput(t, ctx, ws, tr.Job)[0]
		if torch == nil || len(torch.steps) == 0 {
			t.Fatalf("trial %d (%s): no output of the torch program", tr.ID, tr.Job)
		}
		if last := torch.steps[len(torch.steps)-1]; last != l.StopAtStep || torch.finalStep != l.StopAtStep {
			t.Errorf("trial %d: the program reported up to step %d (final step %d), want its generation's end %d", tr.ID, last, torch.finalStep, l.StopAtStep)
		}
		if uri, step, err := checkpoint.ParseRef(lastCkpt[tr.ID]); err != nil || step != l.StopAtStep || !strings.HasSuffix(uri, "/"+tr.Job) {
			t.Errorf("trial %d: last checkpoint %q (%v), want one of job %s at step %d", tr.ID, lastCkpt[tr.ID], err, tr.Job, l.StopAtStep)
		}
		if l.Generation == 0 {
			if torch.resumed != "" || l.ResumeFrom != "" {
				t.Errorf("trial %d of the first generation resumed (%q, lineage %q)", tr.ID, torch.resumed, l.ResumeFrom)
			}
			continue
		}
		// The program itself says which checkpoint it loaded, and at which step.
		from := tr.ID - pop // its own previous segment
		if l.Donor != nil {
			from = *l.Donor
		}
		wantResume := fmt.Sprintf("%s %d", lastCkpt[from], l.StopAtStep-interval)
		if l.ResumeFrom != lastCkpt[from] || torch.resumed != wantResume {
			t.Errorf("trial %d: resumed %q (lineage %q), want %q: trial %d's newest checkpoint", tr.ID, torch.resumed, l.ResumeFrom, wantResume, from)
		}
		if torch.steps[0] != l.StopAtStep-interval+1 {
			t.Errorf("trial %d: first reported step %d, want %d", tr.ID, torch.steps[0], l.StopAtStep-interval+1)
		}
		if l.Donor == nil {
			if !cmp.Equal(tr.Params, st.Trials[from].Params) {
				t.Errorf("trial %d carried on from its own checkpoint with params %v, its parent's were %v", tr.ID, tr.Params, st.Trials[from].Params)
			}
			continue
		}
		exploits++
		donor := st.Trials[*l.Donor]
		if donor.PBT == nil || donor.PBT.Generation != l.Generation-1 {
			t.Errorf("trial %d: donor %d is not of the previous generation", tr.ID, *l.Donor)
		}
		if !cmp.Equal(l.ParamsBefore, donor.Params) || cmp.Equal(tr.Params, donor.Params) {
			t.Errorf("trial %d: params %v, before explore %v, donor's %v: explore must start from the donor's and change them",
				tr.ID, tr.Params, l.ParamsBefore, donor.Params)
		}
		// The job ran with the explored parameters.
		j, err := env.api.GetJob(ctx, ws, tr.Job)
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Join(j.Spec.Spec.Args, " ")
		if lr := fmt.Sprint(tr.Params["lr"]); !strings.Contains(args, "--lr "+lr) {
			t.Errorf("trial %d: job args %q lack --lr %s", tr.ID, args, lr)
		}
		t.Logf("generation %d: trial %d copied trial %d's checkpoint (%s) and explored %v: %v -> %v; its loss %.4f (donor's %.4f)",
			l.Generation, tr.ID, *l.Donor, torch.resumed, l.Explore, l.ParamsBefore, tr.Params, *tr.Value, *donor.Value)
	}
	if exploits != gens-1 {
		t.Errorf("%d exploits in %d generations after the first of %d members (quantile 0.25: one each), want %d", exploits, gens-1, pop, gens-1)
	}
	t.Logf("best trial %d loss %.4f %v", *st.BestTrial, *st.BestValue, st.BestParams)
}
