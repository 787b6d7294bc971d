package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/backend/kube"
)

// podFlags are the worker's defaults for every pod on Kubernetes; pools' policies
// (--pool-*) and jobs' spec.pod refine them.
type podFlags struct {
	pullSecrets    []string
	serviceAccount string
	shmSize        string
	runAsUser      int64
}

func (f *podFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.pullSecrets, "image-pull-secret", nil, "kubernetes: image pull secret (in each workspace namespace) of every pod; repeatable")
	fs.StringVar(&f.serviceAccount, "service-account", "", "kubernetes: service account of pods whose job and pool name none (default: the namespace's default, no token mounted)")
	fs.StringVar(&f.shmSize, "shm-size", kube.DefaultShmSize.String(), "kubernetes: default size limit of every pod's memory-backed /dev/shm; 0 mounts none")
	fs.Int64Var(&f.runAsUser, "run-as-user", 0, "kubernetes: run every container as this user id (default: the image's user)")
}

// options parses the flags into kube options.
func (f *podFlags) options() ([]kube.Option, error) {
	shm, err := resource.ParseQuantity(f.shmSize)
	if err != nil {
		return nil, fmt.Errorf("--shm-size %q: %w", f.shmSize, err)
	}
	opts := []kube.Option{kube.WithShmSize(shm), kube.WithImagePullSecrets(f.pullSecrets...), kube.WithServiceAccount(f.serviceAccount)}
	if f.runAsUser != 0 {
		opts = append(opts, kube.WithRunAsUser(f.runAsUser))
	}
	return opts, nil
}
