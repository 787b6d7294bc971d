package main

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/backend/kube"
)

// podFlags are the worker's defaults for every pod on Kubernetes; pools' policies
// (--pool-*) and jobs' spec.pod refine them.
type podFlags struct {
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	ServiceAccount   string   `json:"serviceAccount,omitempty"`
	ShmSize          string   `json:"shmSize,omitempty"`
	RunAsUser        int64    `json:"runAsUser,omitempty"`
}

func (f *podFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.ImagePullSecrets, "image-pull-secret", nil, "kubernetes: image pull secret (in each workspace namespace) of every pod; repeatable")
	fs.StringVar(&f.ServiceAccount, "service-account", "", "kubernetes: service account of pods whose job and pool name none (default: the namespace's default, no token mounted)")
	fs.StringVar(&f.ShmSize, "shm-size", kube.DefaultShmSize.String(), "kubernetes: default size limit of every pod's memory-backed /dev/shm; 0 mounts none")
	fs.Int64Var(&f.RunAsUser, "run-as-user", 0, "kubernetes: run every container as this user id (default: the image's user)")
}

// options parses the flags into kube options.
func (f *podFlags) options() ([]kube.Option, error) {
	shm, err := resource.ParseQuantity(f.ShmSize)
	if err != nil {
		return nil, fmt.Errorf("--shm-size %q: %w", f.ShmSize, err)
	}
	opts := []kube.Option{kube.WithShmSize(shm), kube.WithImagePullSecrets(f.ImagePullSecrets...), kube.WithServiceAccount(f.ServiceAccount)}
	if f.RunAsUser != 0 {
		opts = append(opts, kube.WithRunAsUser(f.RunAsUser))
	}
	return opts, nil
}
