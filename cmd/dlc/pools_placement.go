package main

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/backend/kube"
)

// registerPlacement adds the pool flags of gang placement.
func (f *poolFlags) registerPlacement(fs *pflag.FlagSet, prefix string) {
	fs.StringArrayVar(&f.PlacementTimeout, "pool-placement-timeout", nil, prefix+
		fmt.Sprintf("POOL=DURATION|none: how long a pool's gang may wait for all its pods to be scheduled before they are released and it is queued again, for jobs that set no spec.resources.placementTimeout (default %s; none waits for ever)", backend.DefaultPlacementTimeout))
	fs.StringArrayVar(&f.Autoscaled, "pool-autoscaled", nil, prefix+
		"POOL whose nodes a cluster autoscaler adds on demand: its gangs are not refused as unschedulable for what the present nodes cannot hold; repeatable")
}

// placement parses the placement flags into the pools' configurations.
func (f *poolFlags) placement(get func(flag, v string) (*kube.PoolConfig, string, error)) error {
	for _, v := range f.PlacementTimeout {
		pc, rest, err := get("--pool-placement-timeout", v)
		if err != nil {
			return err
		}
		if rest == "none" {
			pc.PlacementTimeout = -1
			continue
		}
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return fmt.Errorf("--pool-placement-timeout %q: want POOL=DURATION (positive, e.g. 15m) or POOL=none", v)
		}
		pc.PlacementTimeout = d
	}
	for _, v := range f.Autoscaled {
		pc, _, err := get("--pool-autoscaled", v+"=true")
		if err != nil {
			return err
		}
		pc.Autoscaled = true
	}
	return nil
}
