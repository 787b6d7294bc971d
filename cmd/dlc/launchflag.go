package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/backend/kube"
)

// registerLaunchConcurrency adds --launch-concurrency: how many gangs the Kubernetes
// backend of this worker creates the objects of at once (backend/kube/launch_slots.go).
func registerLaunchConcurrency(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "launch-concurrency", kube.DefaultLaunchConcurrency,
		"kubernetes: how many jobs this worker creates the pods and Services of at once; the others wait their turn (docs/stability.md, Pod logs)")
}

// checkLaunchConcurrency refuses fewer than one launch at a time.
func checkLaunchConcurrency(n int) error {
	if n < 1 {
		return fmt.Errorf("--launch-concurrency: %d is less than 1; want how many jobs launch at once, e.g. %d", n, kube.DefaultLaunchConcurrency)
	}
	return nil
}
