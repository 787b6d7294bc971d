package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
)

// batchFlags hand pools' gangs to the cluster's batch scheduler on Kubernetes.
type batchFlags struct {
	GangScheduler []string `json:"gangScheduler,omitempty"` // POOL=opendlc|coscheduling|volcano|kueue
	SchedulerName []string `json:"schedulerName,omitempty"` // POOL=SCHEDULERNAME
	Queue         []string `json:"queue,omitempty"`         // POOL=QUEUE
}

func (f *batchFlags) register(fs *pflag.FlagSet, prefix string) {
	fs.StringArrayVar(&f.GangScheduler, "pool-gang-scheduler", nil, prefix+"POOL=opendlc|coscheduling|volcano|kueue: who places a pool's gangs (default opendlc: the default scheduler under OpenDLC's placement timeout)")
	fs.StringArrayVar(&f.SchedulerName, "pool-scheduler-name", nil, prefix+"POOL=NAME: schedulerName of a pool's pods under its gang scheduler (default "+kube.DefaultCoschedulingSchedulerName+" for coscheduling, "+kube.VolcanoSchedulerName+" for volcano)")
	fs.StringArrayVar(&f.Queue, "pool-queue", nil, prefix+"POOL=QUEUE: Volcano queue (default "+kube.DefaultVolcanoQueue+") or Kueue LocalQueue (required) of a pool's gangs")
}

// options parses the flags into kube.WithBatchScheduling options.
func (f *batchFlags) options() ([]kube.Option, error) {
	pools, err := f.configs()
	if err != nil {
		return nil, err
	}
	var opts []kube.Option
	for _, p := range schemas.Pools {
		if s := pools[p]; s != nil {
			opts = append(opts, kube.WithBatchScheduling(p, *s))
		}
	}
	return opts, nil
}

// configs parses the flags into the batch scheduling of the pools they name.
func (f *batchFlags) configs() (map[schemas.Pool]*kube.BatchScheduling, error) {
	pools := map[schemas.Pool]*kube.BatchScheduling{}
	parse := func(flag, v string, set func(*kube.BatchScheduling, string) error) error {
		name, rest, ok := strings.Cut(v, "=")
		if !ok || rest == "" {
			return fmt.Errorf("%s %q: want POOL=VALUE", flag, v)
		}
		pool := schemas.Pool(name)
		if !slices.Contains(schemas.Pools, pool) {
			return fmt.Errorf("%s %q: pool must be one of %v", flag, v, schemas.Pools)
		}
		if pools[pool] == nil {
			pools[pool] = &kube.BatchScheduling{}
		}
		if err := set(pools[pool], rest); err != nil {
			return fmt.Errorf("%s %q: %w", flag, v, err)
		}
		return nil
	}
	for _, v := range f.GangScheduler {
		if err := parse("--pool-gang-scheduler", v, func(s *kube.BatchScheduling, rest string) (err error) {
			s.Scheduler, err = kube.ParseGangScheduler(rest)
			return err
		}); err != nil {
			return nil, err
		}
	}
	for _, v := range f.SchedulerName {
		if err := parse("--pool-scheduler-name", v, func(s *kube.BatchScheduling, rest string) error {
			s.SchedulerName = rest
			return nil
		}); err != nil {
			return nil, err
		}
	}
	for _, v := range f.Queue {
		if err := parse("--pool-queue", v, func(s *kube.BatchScheduling, rest string) error {
			s.Queue = rest
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return pools, nil
}
