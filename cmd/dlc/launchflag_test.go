package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/backend/kube"
)

// --launch-concurrency takes how many jobs launch at once; fewer than one is refused
// before anything starts, naming the flag.
func TestWorkerRefusesLaunchConcurrencyBelowOne(t *testing.T) {
	for _, n := range []string{"0", "-3"} {
		c := newRoot()
		c.SetArgs([]string{"worker", "--launch-concurrency", n, "--state-dir", t.TempDir()})
		err := c.Execute()
		if err == nil || !strings.Contains(err.Error(), "--launch-concurrency: "+n+" is less than 1") {
			t.Errorf("dlc worker --launch-concurrency %s: error %v", n, err)
		}
	}
	f := newWorkerCmd().Flags().Lookup("launch-concurrency")
	if f == nil || f.DefValue != strconv.Itoa(kube.DefaultLaunchConcurrency) {
		t.Errorf("dlc worker has no --launch-concurrency flag defaulting to %d: %+v", kube.DefaultLaunchConcurrency, f)
	}
}
