package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/client"
)

// deleteJob is `dlc job delete`: the job leaves the list and its record, events and
// logs stay readable by uid, or, with *purge, everything goes.
func deleteJob(purge *bool) func(*client.Client, context.Context, string, string) error {
	return func(c *client.Client, ctx context.Context, ws, name string) error {
		if *purge {
			return c.PurgeJob(ctx, ws, name)
		}
		return c.DeleteJob(ctx, ws, name)
	}
}

// addPurgeFlag adds --purge to the job command's delete verb.
func addPurgeFlag(job *cobra.Command, purge *bool) {
	for _, sub := range job.Commands() {
		if sub.Name() == "delete" {
			sub.Flags().BoolVar(purge, "purge", false, "remove everything: the workflow history, events, log records and log archive")
		}
	}
}
