package workflows

import (
	"fmt"
	"strconv"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/hpo"
	"github.com/opendlc/opendlc/schemas"
)

// Population-based training (algorithm pbt) in the Experiment workflow. The population
// is spec.parallelism members; generation g is trials g·P to g·P+P-1, member m's segment
// being trial g·P+m. Generation 0 starts from scratch with random parameters. A
// generation starts once every trial of the previous one has finished: the workflow
// then reads each finished trial's newest complete checkpoint (LatestCheckpoint
// activity), asks hpo.PBTNext which members exploit which donor and how they explore,
// records the answer (SideEffect) and keeps it in its state, so the decisions are a
// pure function of the seed and the recorded history, replayed or continued as new.
// Each trial's job resumes from the chosen checkpoint (spec.checkpoint.resumeFrom, so
// DLC_RESUME_FROM), runs with the chosen parameters (DLC_PARAMS) and is told where its
// generation ends in DLC_STOP_AT_STEP.

// EnvStopAtStep tells a PBT trial the value of the objective's step metric at which its
// generation ends: the trainer saves a checkpoint there and exits.
const EnvStopAtStep = "DLC_STOP_AT_STEP"

// pbtState is the population's state carried across continue-as-new: the decisions of
// the newest generation, made once when its first trial started.
type pbtState struct {
	Generation int               `json:"generation"`
	Decisions  []hpo.PBTDecision `json:"decisions"`
}

// pbtLineage is a trial's place in the population.
type pbtLineage struct {
	Member     int `json:"member"`
	Generation int `json:"generation"`
	// Parent is the member's trial of the previous generation; -1 in generation 0.
	Parent int `json:"parent"`
	// Donor is the trial copied (exploit), or -1.
	Donor      int                `json:"donor"`
	ResumeFrom string             `json:"resumeFrom,omitempty"`
	Before     map[string]float64 `json:"before,omitempty"`
	Explore    map[string]string  `json:"explore,omitempty"`
	StopAtStep int64              `json:"stopAtStep"`
}

func (w *experimentWorkflow) isPBT() bool { return w.exp.Spec.Algorithm.Name == schemas.AlgorithmPBT }

// startPBTTrials is startTrials for algorithm pbt: a stopped trial again (after
// resume), else the members of the next generation once the previous one has finished.
func (w *experimentWorkflow) startPBTTrials(ctx workflow.Context) {
	p := w.parallelism()
	interval := w.exp.Spec.PBTSettings().PerturbationInterval
	w.fillSlots(ctx, func(n int) *TrialState {
		gen, m := n/p, n%p
		lin := &pbtLineage{Member: m, Generation: gen, Parent: -1, Donor: -1, StopAtStep: int64(gen+1) * interval}
		var params map[string]float64
		if gen == 0 {
			sug := w.suggest(ctx, n)
			if sug.Err != "" {
				w.suggestFailed(n, sug.Err)
				return nil
			}
			params = sug.Params
		} else {
			for k := (gen - 1) * p; k < gen*p; k++ {
				if !w.st.Trials[k].Phase.Final() {
					return nil
				}
			}
			if !w.pbtDecide(ctx, gen) {
				return nil
			}
			d := w.st.PBT.Decisions[m]
			params = d.Params
			lin.Parent, lin.Donor, lin.ResumeFrom = (gen-1)*p+m, d.Donor, d.ResumeFrom
			lin.Before, lin.Explore = d.Before, d.Explore
		}
		return &TrialState{ID: n, Params: params, Phase: schemas.TrialPending, PBT: lin}
	})
}

// pbtDecide makes generation gen's decisions unless they are made; false when the
// experiment ends instead.
func (w *experimentWorkflow) pbtDecide(ctx workflow.Context, gen int) bool {
	if w.st.PBT != nil && w.st.PBT.Generation == gen {
		return true
	}
	p := w.parallelism()
	prev := make([]hpo.PBTMember, p)
	for m := range p {
		t := w.st.Trials[(gen-1)*p+m]
		prev[m] = hpo.PBTMember{Trial: t.ID, Params: t.Params}
		if t.Phase == schemas.TrialCompleted {
			prev[m].Value = t.Value
		}
		ck, err := latestCheckpoint(ctx, activities.LatestCheckpointInput{URI: w.pbtCheckpointURI(t.Job), Workspace: w.exp.Metadata.Workspace})
		if err != nil {
			w.end(experimentOutcome{schemas.ExperimentFailed, ReasonCheckpointsUnreadable, fmt.Sprintf("listing the checkpoints of trial %d: %s", t.ID, rootMessage(err))})
			return false
		}
		prev[m].Checkpoint = ck
	}
	cfg := w.pbtConfig()
	type answer struct {
		Decisions []hpo.PBTDecision `json:"decisions,omitempty"`
		Err       string            `json:"err,omitempty"`
	}
	var ans answer
	err := workflow.SideEffect(ctx, func(workflow.Context) any {
		d, err := hpo.PBTNext(w.space, hpo.Direction(w.exp.Spec.PrimaryObjective().Direction), cfg, w.st.Seed, gen, prev)
		if err != nil {
			return answer{Err: err.Error()}
		}
		return answer{Decisions: d}
	}).Get(&ans)
	if err == nil && ans.Err != "" {
		err = fmt.Errorf("%s", ans.Err)
	}
	if err != nil {
		w.end(experimentOutcome{schemas.ExperimentFailed, ReasonAlgorithmFailed, fmt.Sprintf("pbt generation %d: %s", gen, err)})
		return false
	}
	w.st.PBT = &pbtState{Generation: gen, Decisions: ans.Decisions}
	for m, d := range ans.Decisions {
		if d.Donor >= 0 {
			w.logger.Info("pbt exploit", "generation", gen, "member", m, "donor", d.Donor, "checkpoint", d.ResumeFrom, "explore", d.Explore)
		}
	}
	return true
}

func (w *experimentWorkflow) pbtConfig() hpo.PBTConfig {
	s := w.exp.Spec.PBTSettings()
	return hpo.PBTConfig{QuantileFraction: s.QuantileFraction, ResampleProbability: *s.ResampleProbability, Factors: s.PerturbationFactors}
}

// pbtCheckpointURI is where a trial job's checkpoints are: the template's URI with the
// job's name appended, as schemas.Experiment.TrialJob makes it.
func (w *experimentWorkflow) pbtCheckpointURI(job string) string {
	return strings.TrimRight(w.exp.Spec.TrialTemplate.Checkpoint.URI, "/") + "/" + job
}

// pbtJob gives a PBT trial's job its checkpoint to resume from and the step at which
// its generation ends.
func (w *experimentWorkflow) pbtJob(t *TrialState, job *schemas.TrainingJob) {
	if t.PBT == nil || job.Spec.Checkpoint == nil {
		return
	}
	job.Spec.Checkpoint.ResumeFrom = t.PBT.ResumeFrom
	job.Spec.Env = append(job.Spec.Env, schemas.EnvVar{Name: EnvStopAtStep, Value: strconv.FormatInt(t.PBT.StopAtStep, 10)})
}

// trialLineage is a trial's lineage as its status shows it.
func (w *experimentWorkflow) trialLineage(t *TrialState) *schemas.TrialLineage {
	l := t.PBT
	if l == nil {
		return nil
	}
	out := &schemas.TrialLineage{Member: l.Member, Generation: l.Generation, ResumeFrom: l.ResumeFrom, StopAtStep: l.StopAtStep, Explore: l.Explore}
	if l.Parent >= 0 {
		parent := l.Parent
		out.Parent = &parent
	}
	if l.Donor >= 0 {
		donor := l.Donor
		out.Donor = &donor
		out.ParamsBefore = w.paramValues(l.Before)
	}
	return out
}
