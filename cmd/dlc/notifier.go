package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/app"
)

// notifierOptions are `dlc notifier`'s: Complete merges the config file, the variables
// and the flags, Validate checks the result, Run runs the notification dispatcher.
type notifierOptions struct {
	configOptions
}

func newNotifierCmd() *cobra.Command {
	o := &notifierOptions{configOptions{command: notifierCommand}}
	cmd := &cobra.Command{
		Use:   "notifier",
		Short: "Run only the notification dispatcher, against an existing NATS",
		Long: "Run only the notification dispatcher: it delivers the events that notification rules\n" +
			"match to their webhooks, chat tools, e-mail and NATS subjects, and redelivers the dead\n" +
			"letters `dlc rule redrive` queues. Run exactly one per NATS system (the Helm chart's\n" +
			"notifier Deployment has one replica and the Recreate strategy): a second one would\n" +
			"rewind the consumers the first is reading.\n" +
			"Its configuration comes from --config (a YAML file, docs/configuration.md), the DLC_*\n" +
			"variables and the flags, each overriding the one before.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.bind(cmd.Flags())
	return cmd
}

// Run starts the dispatcher and runs until ctx ends or the process fails.
func (o *notifierOptions) Run(ctx context.Context, stdout io.Writer) error {
	c := &o.Config
	cfg, err := c.appConfig()
	if err != nil {
		return err
	}
	cfg.Notifications = true
	cfg.WebhookAllow = c.Notifications.WebhookAllow
	cfg.ConsoleURL = c.Notifications.ConsoleURL
	p, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	fmt.Fprintln(stdout, "notification dispatcher started")
	printMetricsURL(stdout, p)
	return p.Wait(ctx)
}
