package main

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/backend/kube"
)

// graceFlags are how long the Kubernetes backend tolerates faults that may go away on
// their own before it fails the replicas they hit.
type graceFlags struct {
	ImagePull Duration `json:"imagePull"`
	NodeLost  Duration `json:"nodeLost"`
	// Stop is how long a stopped or preempted replica has between SIGTERM and SIGKILL:
	// the time its training code has to write a final checkpoint.
	Stop Duration `json:"stop"`
}

func (f *graceFlags) register(fs *pflag.FlagSet) {
	fs.DurationVar((*time.Duration)(&f.ImagePull), "image-pull-grace", kube.DefaultImagePullGrace,
		"kubernetes: how long a replica's image pull may keep failing before the job fails as ImagePull (a registry's not found fails at once); 0: at the first error")
	fs.DurationVar((*time.Duration)(&f.NodeLost), "node-lost-grace", kube.DefaultNodeLostGrace,
		"kubernetes: how long a node may stay NotReady or Unknown before its replicas fail as NodeLost; 0: at once")
	fs.DurationVar((*time.Duration)(&f.Stop), "stop-grace", kube.DefaultStopGracePeriod,
		"kubernetes: how long a stopped or preempted replica has between SIGTERM and SIGKILL to write a final checkpoint (the pods' terminationGracePeriodSeconds)")
}

// options returns the kube options of the flags; the options check the values.
func (f *graceFlags) options() []kube.Option {
	return []kube.Option{kube.WithImagePullGrace(time.Duration(f.ImagePull)), kube.WithNodeLostGrace(time.Duration(f.NodeLost)),
		kube.WithStopGracePeriod(time.Duration(f.Stop))}
}
