package main

import (
	"fmt"
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
}

// register adds the --pool-* flags to cmd; each help starts with prefix, and the
// selector's names the pools with poolNames.
func (f *poolFlags) register(cmd *cobra.Command, prefix, poolNames string) {
	fs := cmd.Flags()
	fs.StringArrayVar(&f.selectors, "pool-selector", nil, prefix+"POOL=KEY=VALUE node selector of a resource pool"+poolNames+"; repeatable")
	fs.StringArrayVar(&f.tolerations, "pool-toleration", nil, prefix+"POOL=KEY[=VALUE]:EFFECT toleration of a resource pool; repeatable")
	fs.StringArrayVar(&f.priorities, "pool-priority-class", nil, prefix+"POOL=PRIORITYCLASS of a resource pool")
}

// options parses the flags into kube.WithPool options.
func (f *poolFlags) options() ([]kube.Option, error) {
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
	var opts []kube.Option
	for _, p := range schemas.Pools {
		if pc := pools[p]; pc != nil {
			opts = append(opts, kube.WithPool(p, *pc))
		}
	}
	return opts, nil
}
