package main

import (
	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/backend/kube"
)

// registerLaunchConcurrency adds --launch-concurrency: how many gangs the Kubernetes
// backend of this worker creates the objects of at once (backend/kube/launch_slots.go).
func registerLaunchConcurrency(fs *pflag.FlagSet, n *int) {
	fs.IntVar(n, "launch-concurrency", kube.DefaultLaunchConcurrency,
		"kubernetes: how many jobs this worker creates the pods and Services of at once; the others wait their turn (docs/stability.md, Pod logs)")
}

// kubeClientFlags are --kube-qps and --kube-burst: the worker's client-side rate limit
// to the Kubernetes API server.
type kubeClientFlags struct {
	QPS   float64 `json:"qps"`
	Burst int     `json:"burst"`
}

func (k *kubeClientFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&k.QPS, "kube-qps", kube.DefaultClientQPS,
		"kubernetes: requests a second this worker sends the API server at most (client-side limit; raise it for thousands of pods per worker, docs/production.md)")
	fs.IntVar(&k.Burst, "kube-burst", kube.DefaultClientBurst,
		"kubernetes: requests this worker may send the API server at once after a quiet spell, above --kube-qps")
}
