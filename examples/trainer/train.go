package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/opendlc/opendlc/checkpoint"
)

// Checkpoint file names.
const (
	modelFile = "model.json"
	stateFile = "state.json"
)

// modelCheckpoint is model.json: the weights, with the feature names they belong to.
type modelCheckpoint struct {
	Features []string `json:"features"`
	Model
}

// stateCheckpoint is state.json: where training stood, and how it was configured.
type stateCheckpoint struct {
	Epoch     int    `json:"epoch"`
	Step      int64  `json:"step"`
	Params    Params `json:"params"`
	WorldSize int    `json:"world_size"`
	Seed      uint64 `json:"seed"`
}

// exitError ends the program with a chosen exit code (--fail-at-epoch).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// trainer runs one rank's training loop.
type trainer struct {
	cfg         config
	train, test *Dataset
	group       Group
	store       *checkpoint.Store // nil unless checkpointing or resuming
	out, log    io.Writer         // metrics and checkpoint lines; plain log lines
	// uploads are the checkpoints being saved in the background (--async-checkpoint),
	// oldest first.
	uploads []*checkpoint.Pending
	// notice is the stop signal; nil in tests that drive the loop directly.
	notice *notice
	// savedStep is the step of the newest checkpoint in DLC_CHECKPOINT_URI this run saved,
	// queued or resumed from; -1 for none.
	savedStep int64
	// reported is the newest checkpoint this run printed a dlc:checkpoint line for.
	reported *checkpoint.Manifest
}

// result is where a run ended.
type result struct {
	syncState
	Loss, Accuracy float64
}

// run trains from the start, or from DLC_RESUME_FROM, to the last epoch, or until a
// notice (see final).
func (t *trainer) run(ctx context.Context) (result, error) {
	rank := t.group.Rank()
	st := syncState{Model: NewModel(len(t.train.Features))}
	t.savedStep = -1
	if rank == 0 && t.cfg.ResumeFrom != "" {
		var err error
		if st, err = t.resume(ctx); err != nil {
			return result{}, err
		}
		if uri, _, _ := checkpoint.ParseRef(t.cfg.ResumeFrom); uri == strings.TrimRight(t.cfg.CheckpointURI, "/") {
			// The state resumed from is a checkpoint of this location already.
			t.savedStep = st.Step
			t.reported = &checkpoint.Manifest{Step: st.Step, Ref: checkpoint.RefFor(uri, st.Step)}
		}
	}
	if err := t.group.Start(ctx, &st); err != nil {
		return result{}, err
	}
	if rank != 0 && st.Epoch > 0 {
		fmt.Fprintf(t.log, "rank %d: starting after epoch %d, step %d, as rank 0 resumed\n", rank, st.Epoch, st.Step)
	}
	if err := st.Model.Check(len(t.train.Features)); err != nil {
		return result{}, err
	}

	// Rank 0 takes the notice over when it checkpoints: from here on the first signal
	// no longer cancels ctx but closes noticed, and the loop ends with a final
	// checkpoint. The exchanges then run under xctx, which ends noticeWait after the
	// notice, so that a silent peer cannot hold rank 0 past the grace period.
	var noticed <-chan struct{}
	xctx := ctx
	if rank == 0 && t.cfg.CheckpointURI != "" && t.cfg.NoticeCheckpoint && t.notice.takeOver() {
		noticed = t.notice.c
		var cancel context.CancelCauseFunc
		xctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		go func() {
			select {
			case <-noticed:
			case <-xctx.Done():
				return
			}
			select {
			case <-time.After(noticeWait):
				cancel(fmt.Errorf("the peers did not finish the exchange within %s of the notice", noticeWait))
			case <-xctx.Done():
			}
		}()
	}
	isNoticed := func() bool {
		select {
		case <-noticed:
			return true
		default:
			return false
		}
	}
	// synced is the state after the last epoch every rank completed together: what a
	// final checkpoint holds. A notice that lands mid-epoch lets the epoch finish (an
	// epoch is one pass over a small in-memory shard) and its exchange complete when the
	// peers take part; if they have exited on their own signals, the final checkpoint is
	// of the epoch before. Either way it is an epoch boundary, with the exact epoch and
	// step in state.json, so a resumed run continues with the next epoch and trains
	// exactly as an uninterrupted one (the ranks only agree at epoch ends; a position
	// within an epoch would hold weights no other rank has).
	synced := st.clone()

	shard := t.train.Shard(rank, t.group.Size())
	hyper := Hyper{LR: t.cfg.LR, BatchSize: t.cfg.BatchSize, L2: t.cfg.L2}
	if st.Epoch >= t.cfg.Epochs {
		fmt.Fprintf(t.log, "rank %d: nothing to do: already trained %d epochs of %d\n", rank, st.Epoch, t.cfg.Epochs)
	}
	for epoch := st.Epoch + 1; epoch <= t.cfg.Epochs; epoch++ {
		if isNoticed() { // no new epoch after a notice
			return t.final(ctx, synced)
		}
		if t.cfg.FailAtEpoch == epoch && (t.cfg.FailAttempt == "" || t.cfg.FailAttempt == t.cfg.Attempt) {
			return result{}, &exitError{code: t.cfg.ExitCode,
				msg: fmt.Sprintf("rank %d: failing at epoch %d with exit code %d, as --fail-at-epoch asks", rank, epoch, t.cfg.ExitCode)}
		}
		// The order of rows depends only on the seed, the epoch and the rank, so a resumed
		// run trains exactly as an uninterrupted one would.
		rng := rand.New(rand.NewPCG(t.cfg.Seed, uint64(epoch)<<16|uint64(rank)))
		st.Step += int64(st.Model.TrainEpoch(shard, hyper, rng))
		st.Epoch = epoch
		if err := t.group.Average(xctx, &st, shard.Len()); err != nil {
			if noticed != nil && ctx.Err() == nil && t.awaitNotice(noticed, err) {
				return t.final(ctx, synced)
			}
			return result{}, err
		}
		if err := st.Model.Check(len(t.train.Features)); err != nil {
			return result{}, fmt.Errorf("epoch %d: %w", epoch, err)
		}
		synced = st.clone()
		if rank == 0 {
			res := t.evaluate(st)
			fmt.Fprintf(t.out, "dlc:metric epoch=%d step=%d loss=%.4f accuracy=%.4f\n", epoch, st.Step, res.Loss, res.Accuracy)
			if t.cfg.CheckpointURI != "" && (epoch%t.cfg.CheckpointEvery == 0 || epoch == t.cfg.Epochs) {
				if err := t.save(ctx, res); err != nil {
					return result{}, err
				}
			}
			if err := t.reap(ctx, epoch == t.cfg.Epochs); err != nil {
				return result{}, err
			}
		} else {
			fmt.Fprintf(t.log, "rank %d: epoch %d done, step %d\n", rank, epoch, st.Step)
		}
		if isNoticed() {
			return t.final(ctx, synced)
		}
		if t.cfg.EpochSleep > 0 && epoch < t.cfg.Epochs {
			select {
			case <-ctx.Done():
				return result{}, context.Cause(ctx)
			case <-noticed:
				return t.final(ctx, synced)
			case <-time.After(t.cfg.EpochSleep):
			}
		}
	}
	return t.evaluate(st), nil
}

// awaitNotice is called by rank 0 when an exchange failed: if the notice has come, or
// comes within noticeWait (a preemption signals every replica, and a peer may have
// exited on its signal before this process got its own), the run ends with a final
// checkpoint. Otherwise the failure stands.
func (t *trainer) awaitNotice(noticed <-chan struct{}, err error) bool {
	select {
	case <-noticed:
		return true
	default:
	}
	fmt.Fprintf(t.log, "trainer: %v; waiting up to %s for a stop signal before failing\n", err, noticeWait)
	select {
	case <-noticed:
		return true
	case <-time.After(noticeWait):
		return false
	}
}

// final ends a noticed run: it prints the notice line, saves synced unless this run has
// already saved (or resumed from) that step, waits for every background upload, prints
// the dlc:checkpoint line of synced's step once it is complete (again, if it was printed
// before the notice), and returns a *noticeTaken. ctx still runs: only a second signal
// cancels it, which aborts the save and leaves at most an incomplete step (no manifest)
// that nothing resumes from.
func (t *trainer) final(ctx context.Context, synced syncState) (result, error) {
	sig, at := t.notice.received()
	fmt.Fprintf(t.out, "dlc:notice signal=%s step=%d\n", signalName(sig), synced.Step)
	before := t.reported
	taken := &noticeTaken{sig: sig, step: synced.Step}
	res := t.evaluate(synced)
	switch {
	case synced.Epoch == 0:
		taken.what = "no epoch completed, nothing to checkpoint"
	case t.savedStep == synced.Step:
		taken.what = "the final checkpoint was saved before the notice"
	default:
		if err := t.save(ctx, res); err != nil {
			return result{}, fmt.Errorf("final checkpoint at step %d: %w", synced.Step, err)
		}
		taken.what = "final checkpoint saved on the notice"
	}
	if err := t.reap(ctx, true); err != nil {
		return result{}, fmt.Errorf("final checkpoint at step %d: %w", synced.Step, err)
	}
	if synced.Epoch > 0 {
		m := t.reported
		if m == nil || m.Step != synced.Step {
			return result{}, fmt.Errorf("final checkpoint at step %d: not reported complete", synced.Step)
		}
		if m == before {
			// Complete before the notice: say so again, after the notice line.
			fmt.Fprintf(t.out, "dlc:checkpoint step=%d uri=%s\n", m.Step, m.Ref)
		}
	}
	taken.took = time.Since(at)
	return res, taken
}

// evaluate measures st's model: the log-loss on the whole training set, the accuracy on
// the test set.
func (t *trainer) evaluate(st syncState) result {
	return result{syncState: st, Loss: st.Model.Loss(t.train), Accuracy: st.Model.Accuracy(t.test)}
}

// save writes a checkpoint of res, or with --async-checkpoint queues its upload.
func (t *trainer) save(ctx context.Context, res result) error {
	mj, err := json.Marshal(modelCheckpoint{Features: t.train.Features, Model: res.Model})
	if err != nil {
		return err
	}
	sj, err := json.Marshal(stateCheckpoint{Epoch: res.Epoch, Step: res.Step, Params: t.cfg.Params, WorldSize: t.group.Size(), Seed: t.cfg.Seed})
	if err != nil {
		return err
	}
	metrics := map[string]float64{"epoch": float64(res.Epoch), "loss": res.Loss, "accuracy": res.Accuracy}
	files := map[string][]byte{modelFile: mj, stateFile: sj}
	t.savedStep = res.Step
	if t.cfg.AsyncCheckpoint {
		t.uploads = append(t.uploads, t.store.SaveAsync(ctx, t.cfg.CheckpointURI, res.Step, files, metrics))
		return nil
	}
	m, err := t.store.Save(ctx, t.cfg.CheckpointURI, res.Step, files, metrics)
	if err != nil {
		return err
	}
	return t.saved(ctx, m)
}

// reap reports the background uploads that have ended, in order, waiting for all of
// them when all is set. A failed upload fails the run, as a failed Save does.
func (t *trainer) reap(ctx context.Context, all bool) error {
	for len(t.uploads) > 0 {
		p := t.uploads[0]
		if !all {
			select {
			case <-p.Done():
			default:
				return nil
			}
		}
		if err := p.Wait(); err != nil {
			return err
		}
		t.uploads = t.uploads[1:]
		if err := t.saved(ctx, p.Manifest()); err != nil {
			return err
		}
	}
	return nil
}

// saved reports a complete checkpoint, then prunes to DLC_CHECKPOINT_KEEP.
func (t *trainer) saved(ctx context.Context, m checkpoint.Manifest) error {
	fmt.Fprintf(t.out, "dlc:checkpoint step=%d uri=%s\n", m.Step, m.Ref)
	t.reported = &m
	if t.cfg.CheckpointKeep > 0 {
		pruned, err := t.store.Prune(ctx, t.cfg.CheckpointURI, t.cfg.CheckpointKeep)
		if err != nil {
			return err
		}
		if len(pruned) > 0 {
			fmt.Fprintf(t.log, "pruned checkpoints at steps %v (keeping %d)\n", pruned, t.cfg.CheckpointKeep)
		}
	}
	return nil
}

// resume loads DLC_RESUME_FROM.
func (t *trainer) resume(ctx context.Context) (syncState, error) {
	m, files, err := t.store.Load(ctx, t.cfg.ResumeFrom)
	if err != nil {
		return syncState{}, fmt.Errorf("resume: %w", err)
	}
	var mc modelCheckpoint
	var sc stateCheckpoint
	for name, v := range map[string]any{modelFile: &mc, stateFile: &sc} {
		data, ok := files[name]
		if !ok {
			return syncState{}, fmt.Errorf("resume from %s: the checkpoint has no %s", m.Ref, name)
		}
		if err := json.Unmarshal(data, v); err != nil {
			return syncState{}, fmt.Errorf("resume from %s: %s: %w", m.Ref, name, err)
		}
	}
	if !slices.Equal(mc.Features, t.train.Features) {
		return syncState{}, fmt.Errorf("resume from %s: the checkpoint's features %q differ from the data's %q", m.Ref, mc.Features, t.train.Features)
	}
	if sc.Step != m.Step {
		return syncState{}, errors.New("resume from " + m.Ref + ": state.json disagrees with the manifest on the step")
	}
	fmt.Fprintf(t.log, "resumed from %s: epoch %d, step %d\n", m.Ref, sc.Epoch, sc.Step)
	return syncState{Epoch: sc.Epoch, Step: sc.Step, Model: mc.Model}, nil
}
