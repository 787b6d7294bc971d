package frameworks

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

func TestSlurmEnv(t *testing.T) {
	// Workers 0 and 1 have 8 GPUs, worker 2 has 4.
	g := gang(schemas.FrameworkSlurm).role("launcher", 1, 0).role("worker", 2, 8).obj()
	g.Replicas = append(g.Replicas, backend.ReplicaSpec{
		Name: g.ReplicaName("worker", 2), Role: "worker", Index: 2, Command: []string{"train"},
		Resources: schemas.Resources{GPU: 4}, WorkingDir: "/work/run",
	})
	alone := gang(schemas.FrameworkSlurm).role("launcher", 1, 0).obj()
	const nodes = "worker-0.gang,worker-1.gang,worker-2.gang"
	id := slurmJobID(g)
	slurm := func(nodelist string, nnodes, ntasks int, perNode string, nodeID, procID, onNode, gpus int, dir string) []schemas.EnvVar {
		env := []schemas.EnvVar{
			{Name: "SLURM_JOB_ID", Value: id},
			{Name: "SLURM_JOBID", Value: id},
			{Name: "SLURM_JOB_NAME", Value: "j"},
			{Name: "SLURM_JOB_NODELIST", Value: nodelist},
			{Name: "SLURM_NODELIST", Value: nodelist},
			{Name: "SLURM_NNODES", Value: itoa(nnodes)},
			{Name: "SLURM_JOB_NUM_NODES", Value: itoa(nnodes)},
			{Name: "SLURM_NTASKS", Value: itoa(ntasks)},
			{Name: "SLURM_NPROCS", Value: itoa(ntasks)},
			{Name: "SLURM_TASKS_PER_NODE", Value: perNode},
			{Name: "SLURM_NTASKS_PER_NODE", Value: itoa(onNode)},
			{Name: "SLURM_NODEID", Value: itoa(nodeID)},
			{Name: "SLURM_PROCID", Value: itoa(procID)},
			{Name: "SLURM_LOCALID", Value: "0"},
		}
		if gpus > 0 {
			env = append(env, schemas.EnvVar{Name: "SLURM_GPUS_ON_NODE", Value: itoa(gpus)})
		}
		if dir != "" {
			env = append(env, schemas.EnvVar{Name: "SLURM_SUBMIT_DIR", Value: dir})
		}
		master, _, _ := strings.Cut(nodelist, ",")
		return append(env, schemas.EnvVar{Name: "MASTER_ADDR", Value: master}, schemas.EnvVar{Name: "MASTER_PORT", Value: "29500"})
	}
	tests := map[string]envForCase{
		"launcher plays the batch step on node 0": {
			gang: g, replica: replica(g, "launcher", 0), want: slurm(nodes, 3, 20, "8(x2),4", 0, 0, 8, 0, ""),
		},
		"worker 1 starts at task 8": {
			gang: g, replica: replica(g, "worker", 1), want: slurm(nodes, 3, 20, "8(x2),4", 1, 8, 8, 8, ""),
		},
		"worker 2 with its working directory": {
			gang: g, replica: replica(g, "worker", 2), want: slurm(nodes, 3, 20, "8(x2),4", 2, 16, 4, 4, "/work/run"),
		},
		"launcher alone is the only node": {
			gang: alone, replica: replica(alone, "launcher", 0), want: slurm("launcher-0.gang", 1, 1, "1", 0, 0, 1, 0, ""),
		},
	}
	testEnvFor(t, tests)
}

func TestCompressCounts(t *testing.T) {
	tests := map[string]struct {
		in   []int
		want string
	}{
		"none":       {nil, ""},
		"one":        {[]int{4}, "4"},
		"run":        {[]int{2, 2, 2}, "2(x3)"},
		"runs":       {[]int{8, 8, 4, 1, 1}, "8(x2),4,1(x2)"},
		"alternates": {[]int{1, 2, 1}, "1,2,1"},
	}
	for name, tc := range tests {
		if got := compressCounts(tc.in); got != tc.want {
			t.Errorf("%s: compressCounts(%v) = %q, want %q", name, tc.in, got, tc.want)
		}
	}
}

// SLURM_JOB_ID is a number, as Lightning's SLURMEnvironment.job_id() needs (int()),
// within Slurm's range, the same for the same gang and different across attempts.
func TestSlurmJobID(t *testing.T) {
	a1 := gang(schemas.FrameworkSlurm).role("launcher", 1, 0).obj()
	a2 := a1
	a2.Attempt = 2
	for _, g := range []backend.GangSpec{a1, a2} {
		id, err := strconv.ParseUint(slurmJobID(g), 10, 32)
		if err != nil || id < 1 || id > maxSlurmJobID {
			t.Errorf("%s: job id %q (%v), want a number in [1, %d]", g.ID(), slurmJobID(g), err, maxSlurmJobID)
		}
	}
	again := a1
	if slurmJobID(a1) != slurmJobID(again) || slurmJobID(a1) == slurmJobID(a2) {
		t.Errorf("job ids %s (attempt 1), %s (attempt 2): want stable per gang and distinct", slurmJobID(a1), slurmJobID(a2))
	}
}

func TestSlurmCommand(t *testing.T) {
	g := gang(schemas.FrameworkSlurm).role("launcher", 1, 0).role("worker", 2, 2).obj()
	g.Replicas = append(g.Replicas, backend.ReplicaSpec{
		Name: g.ReplicaName("worker", 2), Role: "worker", Index: 2, Command: []string{"train"},
	})
	alone := gang(schemas.FrameworkSlurm).role("launcher", 1, 4).obj()
	fanned := append([]string{"/bin/sh", "-c", TaskFanout, taskFanoutName}, "train")
	tests := map[string]struct {
		g    backend.GangSpec
		r    backend.ReplicaSpec
		want []string
	}{
		"worker of two tasks runs one process per task": {g, replica(g, "worker", 0), fanned},
		"worker of one task runs its command":           {g, replica(g, "worker", 2), []string{"train"}},
		"launcher that is not a node runs its command":  {g, replica(g, "launcher", 0), []string{"train"}},
		"launcher alone is the node of four tasks":      {alone, replica(alone, "launcher", 0), fanned},
		"other frameworks run the command as written":   {gang(schemas.FrameworkPyTorch).role("worker", 1, 2).obj(), backend.ReplicaSpec{Role: "worker", Command: []string{"train"}}, []string{"train"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, CommandFor(tc.g, tc.r)); diff != "" {
				t.Errorf("CommandFor (-want +got):\n%s", diff)
			}
		})
	}
}

// TaskFanout, run by a real shell: one process per task with its own SLURM_LOCALID and
// SLURM_PROCID, the arguments passed through intact, and the exit status of a failing
// task.
func TestTaskFanout(t *testing.T) {
	run := func(t *testing.T, env []string, argv ...string) (string, error) {
		t.Helper()
		cmd := exec.Command("/bin/sh", append([]string{"-c", TaskFanout, taskFanoutName}, argv...)...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.Output()
		return string(out), err
	}
	out, err := run(t, []string{"SLURM_NTASKS_PER_NODE=3", "SLURM_PROCID=6", "SLURM_LOCALID=0"},
		"sh", "-c", `echo "$SLURM_PROCID $SLURM_LOCALID $1"`, "task", "a b")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(got)
	if diff := cmp.Diff([]string{"6 0 a b", "7 1 a b", "8 2 a b"}, got); diff != "" {
		t.Errorf("tasks (-want +got):\n%s\noutput: %q", diff, out)
	}

	_, err = run(t, []string{"SLURM_NTASKS_PER_NODE=2", "SLURM_PROCID=0"},
		"sh", "-c", `exit $((3 * SLURM_LOCALID))`)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("a task exiting 3: got %v, want exit status 3", err)
	}
}

// TaskFanout relays each task's streams a whole line at a time: four tasks that write
// every line in three pieces, at once, give whole lines only, on the stream each wrote
// it to; a SIGTERM reaches every task, and the lines a task writes after it (a final
// checkpoint's) still arrive.
func TestTaskFanoutRelaysWholeLines(t *testing.T) {
	const lines = 200
	// Each piece is its own write: printf is a builtin of sh, which writes at once.
	task := `i=0
while [ $i -lt ` + strconv.Itoa(lines) + ` ]; do
	printf 'task %s' "$SLURM_LOCALID"; printf ' line %s' "$i"; printf ' end\n'
	printf 'err %s' "$SLURM_LOCALID" >&2; printf ' line %s\n' "$i" >&2
	i=$((i + 1))
done`
	cmd := exec.Command("/bin/sh", "-c", TaskFanout, taskFanoutName, "sh", "-c", task)
	cmd.Env = append(os.Environ(), "SLURM_NTASKS_PER_NODE=4", "SLURM_PROCID=0")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	outRE := regexp.MustCompile(`^task [0-3] line [0-9]+ end$`)
	errRE := regexp.MustCompile(`^err [0-3] line [0-9]+$`)
	for stream, c := range map[string]struct {
		text string
		re   *regexp.Regexp
	}{"stdout": {stdout.String(), outRE}, "stderr": {stderr.String(), errRE}} {
		got := strings.Split(strings.TrimSuffix(c.text, "\n"), "\n")
		if len(got) != 4*lines {
			t.Errorf("%s: %d lines, want %d", stream, len(got), 4*lines)
		}
		for _, l := range got {
			if !c.re.MatchString(l) {
				t.Fatalf("%s: line %q is not one task's whole line", stream, l)
			}
		}
	}

	// SIGTERM: every task traps it, writes a last line and exits 7.
	dir := t.TempDir()
	cmd = exec.Command("/bin/sh", "-c", TaskFanout, taskFanoutName, "sh", "-c",
		`trap 'echo "task $SLURM_LOCALID saved a checkpoint"; exit 7' TERM; touch "$0/$SLURM_LOCALID"; while :; do sleep 0.05; done`, dir)
	cmd.Env = append(os.Environ(), "SLURM_NTASKS_PER_NODE=2", "SLURM_PROCID=0")
	stdout.Reset()
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "both tasks running", func() bool {
		_, e0 := os.Stat(filepath.Join(dir, "0"))
		_, e1 := os.Stat(filepath.Join(dir, "1"))
		return e0 == nil && e1 == nil
	}, 10*time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 7 {
		t.Errorf("after SIGTERM: %v, want exit status 7", err)
	}
	for _, i := range []string{"0", "1"} {
		if !strings.Contains(stdout.String(), "task "+i+" saved a checkpoint\n") {
			t.Errorf("task %s's last line is missing: %q", i, stdout.String())
		}
	}
}
