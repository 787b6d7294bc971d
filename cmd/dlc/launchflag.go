package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/backend/kube"
)

// registerLaunchConcurrency adds --launch-concurrency: how many gangs the Kubernetes
// backend of this worker creates the objects of at once (backend/kube/launch_slots.go).
func registerLaunchConcurrency(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "launch-concurrency", kube.DefaultLaunchConcurrency,
		"kubernetes: how many jobs this worker creates the pods and Services of at once; the others wait their turn (docs/stability.md, Pod logs)")
}

// checkLaunchConcurrency refuses fewer than one launch at a time.
func checkLaunchConcurrency(n int) error {
	if n < 1 {
		return fmt.Errorf("--launch-concurrency: %d is less than 1; want how many jobs launch at once, e.g. %d", n, kube.DefaultLaunchConcurrency)
	}
	return nil
}

// kubeClientFlags are --kube-qps and --kube-burst: the worker's client-side rate limit
// to the Kubernetes API server.
type kubeClientFlags struct {
	qps   float64
	burst int
}

func (k *kubeClientFlags) register(cmd *cobra.Command) {
	cmd.Flags().Float64Var(&k.qps, "kube-qps", kube.DefaultClientQPS,
		"kubernetes: requests a second this worker sends the API server at most (client-side limit; raise it for thousands of pods per worker, docs/production.md)")
	cmd.Flags().IntVar(&k.burst, "kube-burst", kube.DefaultClientBurst,
		"kubernetes: requests this worker may send the API server at once after a quiet spell, above --kube-qps")
}

// check refuses a limit that would stop or never admit a request, naming the flag.
func (k *kubeClientFlags) check() error {
	if !(k.qps > 0) {
		return fmt.Errorf("--kube-qps: %g is not positive; want requests a second, e.g. %d", k.qps, kube.DefaultClientQPS)
	}
	if k.burst < 1 {
		return fmt.Errorf("--kube-burst: %d is less than 1; want how many requests may go at once, e.g. %d", k.burst, kube.DefaultClientBurst)
	}
	return nil
}
