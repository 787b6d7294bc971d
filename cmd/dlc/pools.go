package main

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
)

// poolFlags map resource pools to where their pods go on Kubernetes.
type poolFlags struct {
	selectors   []string // POOL=KEY=VALUE
	tolerations []string // POOL=KEY[=VALUE]:EFFECT
	priorities  []string // POOL=PRIORITYCLASS

	// Pod policy (kube.PodPolicy) per pool.
	security    []string // POOL=image|restricted
	hostNetwork []string // POOL
	hostPaths   []string // POOL=DIR
	resources   []string // POOL=NAME
	accounts    []string // POOL=SERVICEACCOUNT
	pullSecrets []string // POOL=SECRET

	// Gang placement per pool (backend/kube/placement.go).
	placementTimeouts []string // POOL=DURATION|none
	autoscaled        []string // POOL
}

// register adds the --pool-* flags to cmd; each help starts with prefix, and the
// selector's names the pools with poolNames.
func (f *poolFlags) register(cmd *cobra.Command, prefix, poolNames string) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.selectors, "pool-selector", nil, prefix+"POOL=KEY=VALUE node selector of a resource pool"+poolNames+"; repeatable")
	fs.StringArrayVar(&f.tolerations, "pool-toleration", nil, prefix+"POOL=KEY[=VALUE]:EFFECT toleration of a resource pool; repeatable")
	fs.StringArrayVar(&f.priorities, "pool-priority-class", nil, prefix+"POOL=PRIORITYCLASS of a resource pool")
	fs.StringArrayVar(&f.security, "pool-security", nil, prefix+"POOL=image|restricted: run a pool's containers as the image's user (default) or under the restricted Pod Security Standard")
	fs.StringArrayVar(&f.hostNetwork, "pool-allow-host-network", nil, prefix+"POOL whose jobs may set spec.pod.hostNetwork; repeatable")
	fs.StringArrayVar(&f.hostPaths, "pool-allow-host-path", nil, prefix+"POOL=DIR: a node directory (and what is below it) a pool's jobs may mount as hostPath; repeatable")
	fs.StringArrayVar(&f.resources, "pool-allow-resource", nil, prefix+"POOL=NAME: an extended resource (rdma/hca...) a pool's jobs may request; repeatable")
	fs.StringArrayVar(&f.accounts, "pool-service-account", nil, prefix+"POOL=NAME: service account of a pool's pods whose job names none")
	fs.StringArrayVar(&f.pullSecrets, "pool-image-pull-secret", nil, prefix+"POOL=SECRET: image pull secret of a pool's pods; repeatable")
	f.registerPlacement(cmd, prefix)
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
	for _, v := range f.selectors {
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
	for _, v := range f.tolerations {
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
	for _, v := range f.priorities {
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
	for _, v := range f.security {
		pc, rest, err := get("--pool-security", v)
		if err != nil {
			return err
		}
		if pc.Policy.Security, err = kube.ParseSecurityProfile(rest); err != nil {
			return fmt.Errorf("--pool-security %q: want POOL=image or POOL=restricted", v)
		}
	}
	for _, v := range f.hostNetwork {
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
		{"--pool-allow-host-path", f.hostPaths, func(p *kube.PodPolicy, dir string) error {
			if !path.IsAbs(dir) || path.Clean(dir) != dir {
				return fmt.Errorf("%q is not a clean absolute path", dir)
			}
			p.HostPaths = append(p.HostPaths, dir)
			return nil
		}},
		{"--pool-allow-resource", f.resources, func(p *kube.PodPolicy, name string) error {
			p.ExtendedResources = append(p.ExtendedResources, name)
			return nil
		}},
		{"--pool-service-account", f.accounts, func(p *kube.PodPolicy, name string) error {
			p.ServiceAccountName = name
			return nil
		}},
		{"--pool-image-pull-secret", f.pullSecrets, func(p *kube.PodPolicy, name string) error {
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
