package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
)

// Elastic gangs (backend.Elastic). A replica added by ScaleGang, or replaced by
// ReplaceReplica, is a new supervisor in the replica's directory: its pid and exit files
// are the new process's, and its output is appended to the same output.log, so the
// replica's log records keep their numbering across the replacement and a forwarder
// resuming after seq N reads the new process's lines. A replica removed by ScaleGang is
// stopped and leaves the gang's spec (gang.json); its directory stays until Cleanup.

var _ backend.Elastic = (*Backend)(nil)

// ScaleGang brings a launched gang to spec's replicas: it stops the replicas spec no
// longer has, records spec as the gang's, and starts the replicas spec adds. The other
// replicas keep running. The ports allocated at the first Launch are kept.
func (b *Backend) ScaleGang(ctx context.Context, spec backend.GangSpec) error {
	if err := validate(spec); err != nil {
		return backend.InvalidSpec(err)
	}
	if b.gpusSet && gangWantsGPUs(spec) {
		return backend.InvalidSpec(errors.New("local: a gang with GPUs cannot be scaled on the local backend"))
	}
	return b.withGangLocked(ctx, spec.GangRef, "scale", func(dir string) error {
		st, err := readState(dir)
		if err != nil {
			return err
		}
		if exists(filepath.Join(dir, stoppedFile)) {
			return nil // Stop is final for an attempt
		}
		keep := map[string]bool{}
		for _, r := range spec.Replicas {
			keep[r.Name] = true
		}
		for _, r := range st.Spec.Replicas {
			if !keep[r.Name] {
				if err := b.killReplica(ctx, filepath.Join(dir, r.Name)); err != nil {
					return err
				}
			}
		}
		had := map[string]bool{}
		for _, r := range st.Spec.Replicas {
			had[r.Name] = true
		}
		st.Spec = spec
		data, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			return fmt.Errorf("local: %w", err)
		}
		if err := writeFileAtomic(filepath.Join(dir, stateFile), append(data, '\n')); err != nil {
			return fmt.Errorf("local: %w", err)
		}
		for _, r := range spec.Replicas {
			if had[r.Name] {
				continue
			}
			if err := b.startReplica(ctx, dir, st, r); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReplaceReplica stops what is left of the named replica and starts it again in the
// same directory, with the same environment and rank slot; the others keep running.
func (b *Backend) ReplaceReplica(ctx context.Context, spec backend.GangSpec, replica string) error {
	return b.withGangLocked(ctx, spec.GangRef, "replace", func(dir string) error {
		st, err := readState(dir)
		if err != nil {
			return err
		}
		if exists(filepath.Join(dir, stoppedFile)) {
			return nil
		}
		for _, r := range st.Spec.Replicas {
			if r.Name != replica {
				continue
			}
			if err := b.killReplica(ctx, filepath.Join(dir, r.Name)); err != nil {
				return err
			}
			return b.startReplica(ctx, dir, st, r)
		}
		return backend.InvalidSpec(fmt.Errorf("local: gang %s has no replica %s", spec.ID(), replica))
	})
}

// killReplica ends the supervisor of the replica in rdir, if it runs: SIGTERM to its
// process group, SIGKILL after the grace period. Its exit file is left as written.
func (b *Backend) killReplica(ctx context.Context, rdir string) error {
	s := supervised{rdir: rdir, pid: readPid(rdir)}
	if !b.supervising(s.rdir, s.pid) {
		return nil
	}
	b.signalGroup(s, syscall.SIGTERM)
	left, err := b.waitSupervisors(ctx, []supervised{s}, time.Now().Add(b.grace))
	if err != nil || len(left) == 0 {
		return err
	}
	b.signalGroup(s, syscall.SIGKILL)
	_, err = b.waitSupervisors(ctx, left, time.Now().Add(killTimeout))
	return err
}

// startReplica starts one replica of the gang whose state is st: in a new directory,
// or again in its directory, whose pid and exit files are removed first (its output is
// appended to). The gang is locked.
func (b *Backend) startReplica(ctx context.Context, dir string, st gangState, r backend.ReplicaSpec) error {
	wsEnv, err := b.workspaceEnv(ctx, st.Spec.Workspace)
	if err != nil {
		return err
	}
	ep := b.filesEndpoints(dir, st.Ports)
	fwEnv, err := frameworks.EnvFor(st.Spec, r, ep)
	if err != nil {
		return backend.InvalidSpec(err)
	}
	rdir := filepath.Join(dir, r.Name)
	if err := os.Mkdir(rdir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("local: %w", err)
	}
	for _, f := range []string{pidFile, exitFile, exitTmpFile} {
		if err := os.Remove(filepath.Join(rdir, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("local: %w", err)
		}
	}
	env := b.environ(st.Spec.Workspace, r, wsEnv, fwEnv, rdir)
	argv0, notFound := lookPath(r.Command[0], b.workingDir(r.WorkingDir), env)
	if notFound != nil {
		return cannotStart(rdir, notFound)
	}
	resolved := r
	resolved.Command = append([]string{argv0}, r.Command[1:]...)
	var sb *gangSandbox
	if b.sb != nil {
		if sb, err = b.prepareSandbox(ctx, dir, st.Spec); err != nil {
			return err
		}
	}
	return b.startIn(ctx, sb, rdir, r, frameworks.CommandFor(st.Spec, resolved), env)
}

// gangWantsGPUs reports whether a replica of the gang asks for GPUs.
func gangWantsGPUs(g backend.GangSpec) bool {
	for _, r := range g.Replicas {
		if r.Resources.GPU > 0 {
			return true
		}
	}
	return false
}
