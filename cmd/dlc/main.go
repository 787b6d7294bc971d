// Command dlc is OpenDLC's command line: it runs the embedded stack (`dlc up`), the API
// server and worker on their own, and talks to the API for everything else.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/schemas"
)

// exitError carries a process exit code out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// globals are the flags every API command shares.
type globals struct {
	server    string
	workspace string
	output    string
	token     string
	caCert    string
}

func (g *globals) client() (*client.Client, error) {
	opts := []client.Option{client.WithToken(g.resolveToken())}
	if ca := g.caFile(); ca != "" {
		opts = append(opts, client.WithCAFile(ca))
	}
	return client.New(g.serverURL(), opts...)
}

func (g *globals) serverURL() string {
	if g.server != "" {
		return g.server
	}
	if s := os.Getenv("DLC_SERVER"); s != "" {
		return s
	}
	return "http://" + embedded.DefaultAPIAddr
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot().ExecuteContext(ctx)
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:           "dlc",
		Short:         "OpenDLC: durable deep-learning training jobs on your own machines and Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := root.PersistentFlags()
	pf.StringVar(&g.server, "server", "", "API server URL (default $DLC_SERVER or http://"+embedded.DefaultAPIAddr+")")
	pf.StringVarP(&g.workspace, "workspace", "w", schemas.DefaultWorkspace, "workspace")
	pf.StringVarP(&g.output, "output", "o", "table", "output format: table, yaml or json (job get: also command)")
	pf.StringVar(&g.token, "token", "", "API token (default $DLC_TOKEN, else the admin token that dlc up wrote in "+embedded.DefaultDir()+")")
	pf.StringVar(&g.caCert, "ca-cert", "", "CA certificate (PEM) of an https API server (default $DLC_CA_CERT)")

	root.AddCommand(
		newUpCmd(),
		newServerCmd(),
		newWorkerCmd(),
		newNotifierCmd(),
		newValidateCmd(),
		newRunCmd(g),
		newWhoamiCmd(g),
	)
	// One noun a kind: dlc KIND VERB [NAME] (cliKinds, kinds.go).
	root.AddCommand(kindNouns(g)...)
	root.AddCommand(
		newWorkspaceCmd(g),
		newTokenCmd(g),
		newQuotaCmd(g),
		newEventCmd(g),
		newNodeCmd(g),
		newHistoryCmd(g),
		newLineageCmd(g),
		newUsageCmd(g),
	)
	return root
}
