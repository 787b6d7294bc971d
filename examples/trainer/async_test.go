package main

import (
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var checkpointLine = regexp.MustCompile(`(?m)^dlc:checkpoint step=(\d+) uri=(\S+)$`)

// With --async-checkpoint the checkpoints upload in the background: each is reported
// once complete, in order, the last before the trainer exits, they are pruned to
// DLC_CHECKPOINT_KEEP, and the weights are those of a run that saves synchronously.
func TestAsyncCheckpoint(t *testing.T) {
	fixtures(t)
	s := testStore(t)
	asyncURI, syncURI := testURI(t), testURI(t)
	run := func(uri string, args ...string) string {
		t.Helper()
		p := start(t, append(s3Env(), "DLC_CHECKPOINT_URI="+uri, "DLC_CHECKPOINT_KEEP=2"), append([]string{"--epochs", "4"}, args...)...)
		if rc := p.wait(t, time.Minute); rc != 0 {
			t.Fatalf("trainer %v exited %d:\n%s", args, rc, p.out.String())
		}
		return p.out.String()
	}
	out := run(asyncURI, "--async-checkpoint")
	run(syncURI)

	var reported []int64
	for _, m := range checkpointLine.FindAllStringSubmatch(out, -1) {
		step, _ := strconv.ParseInt(m[1], 10, 64)
		reported = append(reported, step)
	}
	if diff := cmp.Diff([]int64{63, 126, 189, 252}, reported); diff != "" {
		t.Errorf("checkpoints reported (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{189, 252}, checkpointSteps(t, s, asyncURI)); diff != "" {
		t.Errorf("checkpoints kept (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(finalModel(t, s, syncURI), finalModel(t, s, asyncURI)); diff != "" {
		t.Errorf("async checkpoint differs from the synchronous one (-sync +async):\n%s", diff)
	}
}
