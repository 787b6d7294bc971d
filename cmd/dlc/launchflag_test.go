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

// --kube-qps and --kube-burst set the worker's client-side rate limit; a limit that
// would never admit a request is refused before anything starts, naming the flag.
func TestWorkerRefusesKubeClientLimitsBelowOne(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"--kube-qps", "0", "--kube-qps: 0 is not positive"},
		{"--kube-qps", "-5", "--kube-qps: -5 is not positive"},
		{"--kube-qps", "NaN", "--kube-qps: NaN is not positive"},
		{"--kube-burst", "0", "--kube-burst: 0 is less than 1"},
	} {
		c := newRoot()
		c.SetArgs([]string{"worker", tc.flag, tc.value, "--state-dir", t.TempDir()})
		err := c.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("dlc worker %s %s: error %v, want %q", tc.flag, tc.value, err, tc.want)
		}
	}
	flags := newWorkerCmd().Flags()
	if f := flags.Lookup("kube-qps"); f == nil || f.DefValue != strconv.Itoa(kube.DefaultClientQPS) {
		t.Errorf("dlc worker has no --kube-qps flag defaulting to %d: %+v", kube.DefaultClientQPS, f)
	}
	if f := flags.Lookup("kube-burst"); f == nil || f.DefValue != strconv.Itoa(kube.DefaultClientBurst) {
		t.Errorf("dlc worker has no --kube-burst flag defaulting to %d: %+v", kube.DefaultClientBurst, f)
	}
}
