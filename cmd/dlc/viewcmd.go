package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/client"
)

// viewCmd makes a command without arguments that shows what fn reads from the API: fn
// returns the object -o yaml|json prints and the table output, as nameCmd's does.
func (g *globals) viewCmd(use, short string, fn func(cmd *cobra.Command, c *client.Client) (any, func(io.Writer) error, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			v, table, err := fn(cmd, c)
			if err != nil {
				return err
			}
			return g.print(cmd, v, table)
		}),
	}
}
