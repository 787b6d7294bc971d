package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/app"
)

// serverOptions are `dlc server`'s: Complete merges the config file, the variables and
// the flags, Validate checks the result, Run serves the API.
type serverOptions struct {
	configOptions
}

func newServerCmd() *cobra.Command {
	o := &serverOptions{configOptions{command: serverCommand}}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run only the HTTP API, in front of an existing Temporal and NATS",
		Long: "Run only the HTTP API, in front of an existing Temporal and NATS.\n" +
			"Its configuration comes from --config (a YAML file, docs/configuration.md), the DLC_*\n" +
			"variables and the flags, each overriding the one before.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.prepare(cmd); err != nil {
				return err
			}
			return o.Run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.bind(cmd.Flags())
	return cmd
}

// Run starts the API process and serves until ctx ends or the process fails.
func (o *serverOptions) Run(ctx context.Context, stdout, stderr io.Writer) error {
	c := &o.Config
	cfg, err := c.appConfig()
	if err != nil {
		return err
	}
	cfg.API = &app.APIConfig{Addr: c.API.Addr, TLSCertFile: c.API.TLS.Cert, TLSKeyFile: c.API.TLS.Key, AdminTokenFile: c.API.AdminTokenFile}
	p, err := app.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer p.Close()
	if c.API.AdminTokenFile != "" {
		fmt.Fprintf(stderr, "admin token in %s\n", c.API.AdminTokenFile)
	}
	fmt.Fprintf(stdout, "API listening on %s (web console at %s/ui/)\n", p.APIURL, p.APIURL)
	printMetricsURL(stdout, p)
	return p.Wait(ctx)
}
