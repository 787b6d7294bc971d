package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/backend/kube"
)

// graceFlags are how long the Kubernetes backend tolerates faults that may go away on
// their own before it fails the replicas they hit.
type graceFlags struct {
	imagePull time.Duration
	nodeLost  time.Duration
}

func (f *graceFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.DurationVar(&f.imagePull, "image-pull-grace", kube.DefaultImagePullGrace,
		"kubernetes: how long a replica's image pull may keep failing before the job fails as ImagePull (a registry's not found fails at once); 0: at the first error")
	fs.DurationVar(&f.nodeLost, "node-lost-grace", kube.DefaultNodeLostGrace,
		"kubernetes: how long a node may stay NotReady or Unknown before its replicas fail as NodeLost; 0: at once")
}

// options returns the kube options of the flags; the options check the values.
func (f *graceFlags) options() []kube.Option {
	return []kube.Option{kube.WithImagePullGrace(f.imagePull), kube.WithNodeLostGrace(f.nodeLost)}
}
