//go:build linux

package local

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

// An MPI gang's hostfile and discovery script are on disk, in the gang's state
// directory, and a real mpirun on the launcher finds them through
// OMPI_MCA_orte_default_hostfile alone: every worker's slot on 127.0.0.1, listed once.
func TestMPIFilesOnDisk(t *testing.T) {
	b := newBackend(t)
	// The job's own environment, not the backend's: Open MPI refuses to run as root
	// without it, and tests may run as root.
	rootOK := []schemas.EnvVar{{Name: "OMPI_ALLOW_RUN_AS_ROOT", Value: "1"}, {Name: "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", Value: "1"}}
	launcher := rep("launcher", 0, "sh", "-c",
		`cat "$OMPI_MCA_orte_default_hostfile" && "$(dirname "$OMPI_MCA_orte_default_hostfile")/discover_hosts.sh" &&
		 mpirun -np "$DLC_MPI_NP" sh -c 'echo "rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE"'`)
	launcher.Env = rootOK
	w0, w1 := rep("worker", 0, "true"), rep("worker", 1, "true")
	w0.Resources.GPU, w1.Resources.GPU = 2, 1
	g := gangOf(t, schemas.FrameworkMPI, launcher, w0, w1)
	launch(t, b, g)

	dir := filepath.Join(b.gangDir(g.ID()), "files", "etc", "mpi")
	for name, want := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		"hostfile":          {"127.0.0.1 slots=3\n", 0o444},
		"discover_hosts.sh": {"#!/bin/sh\necho 127.0.0.1:3\n", 0o555},
	} {
		p := filepath.Join(dir, name)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != want.content {
			t.Errorf("%s = %q, want %q", name, data, want.content)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want.mode {
			t.Errorf("%s mode = %v (%v), want %v", name, fi.Mode().Perm(), err, want.mode)
		}
	}

	st := waitFor(t, b, g.GangRef, "replicas to finish", terminal)
	for _, r := range st.Replicas {
		if r.Phase != schemas.ReplicaSucceeded {
			t.Errorf("%s: %s (exit %v)", r.Name, r.Phase, r.ExitCode)
		}
	}
	var lines []string
	for _, l := range logs(t, b, g.GangRef, g.Replicas[0].Name, 0) {
		lines = append(lines, l.Line)
	}
	t.Logf("launcher output:\n%s", strings.Join(lines, "\n"))
	ranks := slices.DeleteFunc(slices.Clone(lines), func(s string) bool { return !strings.HasPrefix(s, "rank ") })
	slices.Sort(ranks)
	want := []string{"rank 0 of 3", "rank 1 of 3", "rank 2 of 3"}
	if diff := cmp.Diff(want, ranks); diff != "" {
		t.Errorf("mpirun ranks (-want +got):\n%s", diff)
	}
	if len(lines) < 2 || lines[0] != "127.0.0.1 slots=3" || lines[1] != "127.0.0.1:3" {
		t.Errorf("launcher did not read the hostfile and the discovery script: %q", lines)
	}
}
