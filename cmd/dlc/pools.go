package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
)

// poolFlags map resource pools to where their pods go on Kubernetes: the --pool-* flags,
// and worker.kubernetes.pools of the config file (one entry a value, as the flag takes it).
type poolFlags struct {
	Selector      []string `json:"selector,omitempty"`      // POOL=KEY=VALUE
	Toleration    []string `json:"toleration,omitempty"`    // POOL=KEY[=VALUE]:EFFECT
	PriorityClass []string `json:"priorityClass,omitempty"` // POOL=PRIORITYCLASS

	// Pod policy (kube.PodPolicy) per pool.
	Security         []string `json:"security,omitempty"`         // POOL=image|restricted
	AllowHostNetwork []string `json:"allowHostNetwork,omitempty"` // POOL
	AllowHostPath    []string `json:"allowHostPath,omitempty"`    // POOL=DIR
	AllowResource    []string `json:"allowResource,omitempty"`    // POOL=NAME
	ServiceAccount   []string `json:"serviceAccount,omitempty"`   // POOL=SERVICEACCOUNT
	ImagePullSecret  []string `json:"imagePullSecret,omitempty"`  // POOL=SECRET

	// Gang placement per pool (backend/kube/placement.go).
	PlacementTimeout []string `json:"placementTimeout,omitempty"` // POOL=DURATION|none
	Autoscaled       []string `json:"autoscaled,omitempty"`       // POOL
}

// register adds the --pool-* flags to cmd; each help starts with prefix, and the
// selector's names the pools with poolNames.
func (f *poolFlags) register(fs *pflag.FlagSet, prefix, poolNames string) {
	fs.StringArrayVar(&f.Selector, "pool-selector", nil, prefix+"POOL=KEY=VALUE node selector of a resource pool"+poolNames+"; repeatable")
	fs.StringArrayVar(&f.Toleration, "pool-toleration", nil, prefix+"POOL=KEY[=VALUE]:EFFECT toleration of a resource pool; repeatable")
	fs.StringArrayVar(&f.PriorityClass, "pool-priority-class", nil, prefix+"POOL=PRIORITYCLASS of a resource pool")
	fs.StringArrayVar(&f.Security, "pool-security", nil, prefix+"POOL=image|restricted: run a pool's containers as the image's user (default) or under the restricted Pod Security Standard")
	fs.StringArrayVar(&f.AllowHostNetwork, "pool-allow-host-network", nil, prefix+"POOL whose jobs may set spec.pod.hostNetwork; repeatable")
	fs.StringArrayVar(&f.AllowHostPath, "pool-allow-host-path", nil, prefix+"POOL=DIR: a node directory (and what is below it) a pool's jobs may mount as hostPath; repeatable")
	fs.StringArrayVar(&f.AllowResource, "pool-allow-resource", nil, prefix+"POOL=NAME: an extended resource (rdma/hca...) a pool's jobs may request; repeatable")
	fs.StringArrayVar(&f.ServiceAccount, "pool-service-account", nil, prefix+"POOL=NAME: service account of a pool's pods whose job names none")
	fs.StringArrayVar(&f.ImagePullSecret, "pool-image-pull-secret", nil, prefix+"POOL=SECRET: image pull secret of a pool's pods; repeatable")
	f.registerPlacement(fs, prefix)
}

// options parses the flags into kube.WithPool options.
func (f *poolFlags) options() ([]kube.Option, error) {
	pools, err := f.configs()
	if err != nil {
		return nil, err
	}
	var opts []kube.Option
	for _, p := range schemas.Pools {
		if pc := pools[p]; pc != nil {
			opts = append(opts, kube.WithPool(p, *pc))
		}
	}
	return opts, nil
}

// configs parses the flags into the configurations of the pools they name.
func (f *poolFlags) configs() (map[schemas.Pool]*kube.PoolConfig, error) {
	pools := map[schemas.Pool]*kube.PoolConfig{}
	get := func(flag, v string) (*kube.PoolConfig, string, error) {
		name, rest, ok := strings.Cut(v, "=")
		if !ok || rest == "" {
			return nil, "", fmt.Errorf("%s %q: want POOL=<pool>", flag, v)
		}
		pool := schemas.Pool(name)
		if !slices.Contains(schemas.Pools, pool) {
			return nil, "", fmt.Errorf("%s %q: pool must be one of %v", flag, v, schemas.Pools)
		}
		if pools[pool] == nil {
			pools[pool] = &kube.PoolConfig{}
		}
		return pools[pool], rest, nil
	}
	for _, v := range f.Selector {
		pc, rest, err := get("--pool-selector", v)
		if err != nil {
			return nil, err
		}
		k, val, ok := strings.Cut(rest, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--pool-selector %q: want POOL=KEY=VALUE", v)
		}
		if pc.NodeSelector == nil {
			pc.NodeSelector = map[string]string{}
		}
		pc.NodeSelector[k] = val
	}
	for _, v := range f.Toleration {
		pc, rest, err := get("--pool-toleration", v)
		if err != nil {
			return nil, err
		}
		kv, effect, ok := strings.Cut(rest, ":")
		if !ok || kv == "" {
			return nil, fmt.Errorf("--pool-toleration %q: want POOL=KEY[=VALUE]:EFFECT", v)
		}
		t := corev1.Toleration{Effect: corev1.TaintEffect(effect), Operator: corev1.TolerationOpExists}
		if k, val, hasValue := strings.Cut(kv, "="); hasValue {
			t.Key, t.Value, t.Operator = k, val, corev1.TolerationOpEqual
		} else {
			t.Key = kv
		}
		pc.Tolerations = append(pc.Tolerations, t)
	}
	for _, v := range f.PriorityClass {
		pc, rest, err := get("--pool-priority-class", v)
		if err != nil {
			return nil, err
		}
		pc.PriorityClassName = rest
	}
	if err := f.policies(get); err != nil {
		return nil, err
	}
	if err := f.placement(get); err != nil {
		return nil, err
	}
	return pools, nil
}

// policies parses the pool policy flags into the pools' configurations, which get
// returns by flag and value.
func (f *poolFlags) policies(get func(flag, v string) (*kube.PoolConfig, string, error)) error {
	for _, v := range f.Security {
		pc, rest, err := get("--pool-security", v)
		if err != nil {
			return err
		}
		if pc.Policy.Security, err = kube.ParseSecurityProfile(rest); err != nil {
			return fmt.Errorf("--pool-security %q: want POOL=image or POOL=restricted", v)
		}
	}
	for _, v := range f.AllowHostNetwork {
		pc, _, err := get("--pool-allow-host-network", v+"=true")
		if err != nil {
			return err
		}
		pc.Policy.AllowHostNetwork = true
	}
	lists := []struct {
		flag   string
		values []string
		add    func(*kube.PodPolicy, string) error
	}{
		{"--pool-allow-host-path", f.AllowHostPath, func(p *kube.PodPolicy, dir string) error {
			if !path.IsAbs(dir) || path.Clean(dir) != dir {
				return fmt.Errorf("%q is not a clean absolute path", dir)
			}
			p.HostPaths = append(p.HostPaths, dir)
			return nil
		}},
		{"--pool-allow-resource", f.AllowResource, func(p *kube.PodPolicy, name string) error {
			p.ExtendedResources = append(p.ExtendedResources, name)
			return nil
		}},
		{"--pool-service-account", f.ServiceAccount, func(p *kube.PodPolicy, name string) error {
			p.ServiceAccountName = name
			return nil
		}},
		{"--pool-image-pull-secret", f.ImagePullSecret, func(p *kube.PodPolicy, name string) error {
			p.ImagePullSecrets = append(p.ImagePullSecrets, name)
			return nil
		}},
	}
	for _, l := range lists {
		for _, v := range l.values {
			pc, rest, err := get(l.flag, v)
			if err != nil {
				return err
			}
			if err := l.add(&pc.Policy, rest); err != nil {
				return fmt.Errorf("%s %q: %w", l.flag, v, err)
			}
		}
	}
	return nil
}
