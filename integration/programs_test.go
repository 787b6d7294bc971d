package integration

// Real distributed programs on the local backend, submitted as the examples under
// examples/ are written: XGBoost's collective across three replicas and an MPI program
// that the launcher starts with mpirun over the job's hostfile. Each test checks what
// the framework computed (allreduce sums, identical models, the hostfile's slots), not
// only the job's phase. They need Debian's python3-xgboost, python3-mpi4py and
// openmpi-bin (`task deps`).

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// requireProgram fails (never skips) when a program the test runs is missing: argv is
// run and must succeed; pkg names the Debian package that provides it.
func requireProgram(t *testing.T, pkg string, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("this test needs %s (Debian package %s): run `task deps` (%v: %s)", strings.Join(argv, " "), pkg, err, out)
	}
}

// exampleJob reads the TrainingJob of examples/<file> and returns it for workspace ws:
// the example unchanged but for its workspace and its working directory, the repository
// root, against which its relative paths are written.
func exampleJob(t *testing.T, file, ws string) (spec string, name string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rootDir(t), "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	job, err := schemas.DecodeTrainingJob(data)
	if err != nil {
		t.Fatalf("examples/%s: %v", file, err)
	}
	job.Metadata.Workspace = ws
	job.Spec.WorkingDir = rootDir(t)
	out, err := yaml.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), job.Metadata.Name
}

// rootDir is the repository's root, absolute.
func rootDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// runExample submits examples/<file> in the test's workspace and waits for it to
// succeed, logging the job's output otherwise. It returns the job and its log records.
func runExample(t *testing.T, file string) (*api.Job, []events.LogRecord) {
	t.Helper()
	ctx := testContext(t)
	ws := workspace(t)
	spec, name := exampleJob(t, file, ws)
	submit(t, ctx, spec)
	j := waitTerminal(t, ctx, ws, name)
	logs := jobLogs(t, ctx, ws, name)
	if j.Status.Phase != schemas.JobSucceeded {
		for _, r := range logs {
			t.Logf("[%s] %s", r.Replica, r.Line)
		}
		t.Fatalf("%s: phase %s (%s: %s), want Succeeded", file, j.Status.Phase, j.Status.Reason, j.Status.Message)
	}
	return j, logs
}

// replicaOf names a log record's replica by role and index, as "worker-0".
func replicaOf(r events.LogRecord) string { return r.Role + "-" + strconv.Itoa(r.Index) }

// tagged decodes every log line "<tag> <json>" of the records into a new T, keyed by
// the line's replica (replicaOf).
func tagged[T any](t *testing.T, logs []events.LogRecord, tag string) map[string][]T {
	t.Helper()
	out := map[string][]T{}
	for _, r := range logs {
		doc, ok := strings.CutPrefix(r.Line, tag+" ")
		if !ok {
			continue
		}
		var v T
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatalf("[%s] %q: %v", r.Replica, r.Line, err)
		}
		out[replicaOf(r)] = append(out[replicaOf(r)], v)
	}
	return out
}

// xgbResult is the line examples/xgboost/train.py prints on every rank.
type xgbResult struct {
	Rank         int     `json:"rank"`
	WorldSize    int     `json:"world_size"`
	AllreduceSum float64 `json:"allreduce_sum"`
	ShardRows    int     `json:"shard_rows"`
	TotalRows    int     `json:"total_rows"`
	Rounds       int     `json:"rounds"`
	ModelSHA256  string  `json:"model_sha256"`
	TrainLogloss float64 `json:"train_logloss"`
	TrainError   float64 `json:"train_error"`
}

// examples/xgboost: a master and two workers form XGBoost's collective through the
// tracker the master starts on DMLC_TRACKER_PORT. Each replica's collective rank is its
// OpenDLC rank (master-0 is 0), an allreduce of rank+1 gives 6 on every rank, the three
// shards add up to the whole data set, every rank ends with the same model (one SHA-256)
// and the same cross-worker metrics, and rank 0's metric reports of every round are
// forwarded, the training loss going down.
func TestXGBoostTrainsAcrossThreeReplicas(t *testing.T) {
	requireXGBoost(t)
	_, logs := runExample(t, "xgboost/job.yaml")
	checkXGBoostExample(t, logs)
}

// requireXGBoost fails when Debian's python3-xgboost is missing.
func requireXGBoost(t *testing.T) {
	t.Helper()
	requireProgram(t, "python3-xgboost", python, "-c", "import xgboost.tracker, xgboost.collective")
}

// checkXGBoostExample checks what examples/xgboost/job.yaml computed, from its logs
// (TestXGBoostTrainsAcrossThreeReplicas).
func checkXGBoostExample(t *testing.T, logs []events.LogRecord) {
	t.Helper()
	results := tagged[xgbResult](t, logs, "xgboost-result")
	wantRank := map[string]int{"master-0": 0, "worker-0": 1, "worker-1": 2}
	if len(results) != len(wantRank) || len(results["master-0"]) == 0 {
		t.Fatalf("results from %d replicas (%v), want one from each of %v", len(results), results, wantRank)
	}
	master := results["master-0"][0]
	var hashes []string
	rows := 0
	for replica, rs := range results {
		r := rs[len(rs)-1]
		want, ok := wantRank[replica]
		switch {
		case !ok || len(rs) != 1:
			t.Errorf("%s printed %d results", replica, len(rs))
		case r.Rank != want || r.WorldSize != 3:
			t.Errorf("%s is rank %d of %d in the collective, want %d of 3", replica, r.Rank, r.WorldSize, want)
		}
		if r.AllreduceSum != 6 {
			t.Errorf("%s: allreduce of rank+1 = %v, want 6", replica, r.AllreduceSum)
		}
		if r.TotalRows != 6000 || r.Rounds != 20 {
			t.Errorf("%s: %d rows in all, %d rounds; want 6000 and 20 (job.yaml's args)", replica, r.TotalRows, r.Rounds)
		}
		rows += r.ShardRows
		hashes = append(hashes, r.ModelSHA256)
		if r.TrainLogloss != master.TrainLogloss || r.TrainError != master.TrainError {
			t.Errorf("%s ends with logloss %v error %v, master-0 with %v %v: not the same cross-worker metrics", replica,
				r.TrainLogloss, r.TrainError, master.TrainLogloss, master.TrainError)
		}
	}
	if rows != 6000 {
		t.Errorf("the shards hold %d rows, want 6000: each rank its own third", rows)
	}
	for _, h := range hashes[1:] {
		if h != hashes[0] {
			t.Errorf("the ranks trained different models: %v", hashes)
			break
		}
	}

	// Rank 0 reports every round; the others report nothing.
	var metrics []map[string]float64
	for _, r := range logs {
		if vals, ok := events.ParseMetricLine(r.Line); ok {
			if replicaOf(r) != "master-0" {
				t.Errorf("%s reported metrics: %q", r.Replica, r.Line)
			}
			metrics = append(metrics, vals)
		}
	}
	if len(metrics) != 20 {
		t.Fatalf("%d metric reports, want 20 (one per round)", len(metrics))
	}
	for i, m := range metrics {
		if m["step"] != float64(i+1) {
			t.Errorf("report %d is of step %v", i, m["step"])
		}
	}
	first, last := metrics[0]["train_logloss"], metrics[len(metrics)-1]
	if last["train_logloss"] != master.TrainLogloss || last["train_error"] != master.TrainError {
		t.Errorf("last report %v, final metrics logloss %v error %v", last, master.TrainLogloss, master.TrainError)
	}
	if !(last["train_logloss"] < first/2) || last["train_error"] > 0.1 {
		t.Errorf("training did not learn: logloss %v -> %v, final error %v", first, last["train_logloss"], last["train_error"])
	}
	t.Logf("model %s on 3 ranks, allreduce 6, logloss %.4f -> %.4f, error %.4f", hashes[0], first, last["train_logloss"], last["train_error"])
}

// mpiRank and mpiResult are the lines examples/mpi/allreduce.py prints.
type mpiRank struct {
	Rank int    `json:"rank"`
	Size int    `json:"size"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
}

type mpiResult struct {
	Size     int      `json:"size"`
	Sum      int      `json:"sum"`
	Expected int      `json:"expected"`
	Ranks    []int    `json:"ranks"`
	Hosts    []string `json:"hosts"`
}

// hostfileLine is a line of an Open MPI hostfile: "host slots=N".
var hostfileLine = regexp.MustCompile(`^(\S+) slots=(\d+)$`)

// examples/mpi: the launcher runs mpirun over the hostfile OpenDLC wrote, with neither a
// host list nor a rank count of its own; the hostfile names 127.0.0.1 once with the
// three workers' slots summed, and mpirun starts as many ranks, which allreduce rank+1
// to 6. The launcher decides: the job succeeds and the sleeping workers are stopped.
func TestMPIRunsOverTheHostfile(t *testing.T) {
	requireMPI(t)
	j, logs := runExample(t, "mpi/job.yaml")
	checkMPIExample(t, j, logs)
}

// requireMPI fails when Debian's openmpi-bin or python3-mpi4py is missing.
func requireMPI(t *testing.T) {
	t.Helper()
	requireProgram(t, "openmpi-bin", "mpirun", "--version")
	requireProgram(t, "python3-mpi4py", python, "-c", "from mpi4py import MPI")
}

// checkMPIExample checks what examples/mpi/job.yaml did, from the job and its logs
// (TestMPIRunsOverTheHostfile).
func checkMPIExample(t *testing.T, j *api.Job, logs []events.LogRecord) {
	t.Helper()
	phases := map[string]schemas.ReplicaPhase{}
	for _, r := range j.Status.Replicas {
		phases[r.Role+"-"+strconv.Itoa(r.Index)] = r.Phase
	}
	wantPhases := map[string]schemas.ReplicaPhase{"launcher-0": "Succeeded", "worker-0": "Stopped", "worker-1": "Stopped", "worker-2": "Stopped"}
	if diff := cmp.Diff(wantPhases, phases); diff != "" {
		t.Errorf("replica phases (-want +got):\n%s", diff)
	}

	hosts := map[string]int{}
	slots := 0
	for _, r := range logs {
		line, ok := strings.CutPrefix(r.Line, "hostfile: ")
		if !ok || replicaOf(r) != "launcher-0" {
			continue
		}
		m := hostfileLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			t.Errorf("hostfile line %q is not \"host slots=N\"", line)
			continue
		}
		n, _ := strconv.Atoi(m[2])
		hosts[m[1]]++
		slots += n
	}
	if diff := cmp.Diff(map[string]int{"127.0.0.1": 1}, hosts); diff != "" {
		t.Errorf("hosts in the hostfile, with how often each appears (-want +got):\n%s", diff)
	}
	if slots != 3 {
		t.Errorf("the hostfile has %d slots, want 3 (one per worker)", slots)
	}

	ranks := tagged[mpiRank](t, logs, "mpi-rank")["launcher-0"]
	results := tagged[mpiResult](t, logs, "mpi-result")["launcher-0"]
	if len(results) != 1 {
		t.Fatalf("the launcher printed %d results, want 1", len(results))
	}
	res := results[0]
	if res.Size != slots || len(ranks) != slots {
		t.Errorf("mpirun started %d ranks (%d said so), want the hostfile's %d slots", res.Size, len(ranks), slots)
	}
	if res.Sum != 6 || res.Expected != 6 {
		t.Errorf("allreduce of rank+1 = %d (expected %d), want 6", res.Sum, res.Expected)
	}
	got := make([]int, 0, len(ranks))
	pids := map[int]bool{}
	for _, r := range ranks {
		got = append(got, r.Rank)
		pids[r.PID] = true
		if r.Size != res.Size {
			t.Errorf("rank %d says size %d, rank 0 %d", r.Rank, r.Size, res.Size)
		}
	}
	sort.Ints(got)
	if diff := cmp.Diff([]int{0, 1, 2}, got); diff != "" || !cmp.Equal([]int{0, 1, 2}, res.Ranks) || len(pids) != 3 {
		t.Errorf("ranks %v (gathered %v) in %d processes, want 0, 1 and 2 in 3", got, res.Ranks, len(pids))
	}
	for _, r := range logs {
		if replicaOf(r) != "launcher-0" && strings.HasPrefix(r.Line, "mpi-") {
			t.Errorf("%s ran the program: %q", r.Replica, r.Line)
		}
	}
	t.Logf("hostfile %v (%d slots); mpirun ran %d ranks on %v; allreduce %d", hosts, slots, res.Size, res.Hosts, res.Sum)
}
