package realnode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
)

// exampleJob reads an example's job.yaml (examples/<dir>/job.yaml, as a user would
// submit it) and returns it named name in workspace ws, on the training image, whose
// working directory holds the repository's examples/ and python/ as the examples
// expect.
func exampleJob(t *testing.T, dir, name, ws string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(itest.Root(), "examples", dir, "job.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "metadata:"):
			line = fmt.Sprintf("metadata: {name: %s, workspace: %s}", name, ws)
		case line == "spec:":
			line = "spec:\n  image: " + env.training.Root.Ref
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// examples/pytorch/torchrun in containers: torchrun starts 2 processes in each of the 2
// pods, rendezvousing through the variables OpenDLC sets (the first pod's DNS name);
// all 4 ranks' first all-reduce sums rank+1 to 10, and they end with the same
// parameters.
func TestTorchrunExampleInContainers(t *testing.T) {
	ctx := itest.Context(t, 8*time.Minute)
	const ws, name = "rn-torchrun", "torchrun"
	submit(t, ctx, exampleJob(t, "pytorch/torchrun", name, ws))
	mustSucceed(t, ctx, ws, name)
	sums, params := map[string]bool{}, map[string]bool{}
	ranks := 0
	for _, r := range jobLogs(t, ctx, ws, name) {
		if m := allReduceLine.FindStringSubmatch(r.Line); m != nil {
			ranks++
			sums[fmt.Sprintf("world=%s sum=%s expected=%s", m[2], m[3], m[4])] = true
		}
		if m := paramsLine.FindStringSubmatch(r.Line); m != nil {
			params[m[2]] = true
		}
	}
	if ranks != 4 || len(sums) != 1 || !sums["world=4 sum=10 expected=10"] {
		t.Errorf("%d ranks reported their first all-reduce: %v; want 4 with world=4 sum=10", ranks, sums)
	}
	if len(params) != 1 {
		t.Errorf("parameter digests %v, want one shared by every rank", params)
	}
}

// examples/xgboost in containers: a master and two workers form XGBoost's collective
// through the master's tracker (its DNS name); every rank is its OpenDLC rank, an
// allreduce of rank+1 gives 6, the shards add up to the data set, and every rank ends
// with the same model.
func TestXGBoostExampleInContainers(t *testing.T) {
	ctx := itest.Context(t, 8*time.Minute)
	const ws, name = "rn-xgboost", "xgboost"
	submit(t, ctx, exampleJob(t, "xgboost", name, ws))
	mustSucceed(t, ctx, ws, name)
	type result struct {
		Rank         int     `json:"rank"`
		WorldSize    int     `json:"world_size"`
		AllreduceSum float64 `json:"allreduce_sum"`
		ShardRows    int     `json:"shard_rows"`
		TotalRows    int     `json:"total_rows"`
		ModelSHA256  string  `json:"model_sha256"`
	}
	want := map[string]int{"master-0": 0, "worker-0": 1, "worker-1": 2}
	rows := 0
	models := map[string]bool{}
	got := map[string]int{}
	for _, r := range jobLogs(t, ctx, ws, name) {
		doc, ok := strings.CutPrefix(r.Line, "xgboost-result ")
		if !ok {
			continue
		}
		var res result
		if err := json.Unmarshal([]byte(doc), &res); err != nil {
			t.Fatalf("[%s] %q: %v", r.Replica, r.Line, err)
		}
		replica := fmt.Sprintf("%s-%d", r.Role, r.Index)
		got[replica] = res.Rank
		if res.WorldSize != 3 || res.AllreduceSum != 6 || res.TotalRows != 6000 {
			t.Errorf("%s: world %d, allreduce %v, rows %d; want 3, 6, 6000", replica, res.WorldSize, res.AllreduceSum, res.TotalRows)
		}
		rows += res.ShardRows
		models[res.ModelSHA256] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("collective ranks %v, want %v", got, want)
	}
	if rows != 6000 || len(models) != 1 {
		t.Errorf("shards hold %d rows (want 6000), models %v (want one)", rows, models)
	}
}
