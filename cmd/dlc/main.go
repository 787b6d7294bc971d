// Command dlc is OpenDLC's command line: it runs the embedded stack (`dlc up`), the API
// server and worker on their own, and talks to the API for everything else.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
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
		newValidateCmd(),
		newRunCmd(g),
		newWhoamiCmd(g),
	)
	// One noun a kind: dlc KIND VERB [NAME].
	root.AddCommand(
		newJobCmd(g),
		newExperimentCmd(g),
		newScheduleCmd(g),
		newPipelineCmd(g),
		newTriggerCmd(g),
		newRuleCmd(g),
		newWorkspaceCmd(g),
		newTokenCmd(g),
		newQuotaCmd(g),
		newEventCmd(g),
		newNodeCmd(g),
	)
	addVerbAliases(root, g)
	return root
}

// jobVerbAliases are the verbs of the verb-first grammar that came before the nouns:
// `dlc submit` is `dlc job submit`, and so on.
var jobVerbAliases = []string{"submit", "list", "describe", "logs", "stop", "delete", "clone"}

// addVerbAliases adds the old verb-first commands, hidden from help: the job verbs, made
// by the same code as `dlc job VERB`, and `dlc get KIND [NAME]`.
func addVerbAliases(root *cobra.Command, g *globals) {
	job := newJobCmd(g)
	for _, sub := range job.Commands() {
		if slices.Contains(jobVerbAliases, sub.Name()) {
			job.RemoveCommand(sub)
			sub.Hidden = true
			root.AddCommand(sub)
		}
	}
	root.AddCommand(&cobra.Command{
		Use:    "get KIND [NAME]",
		Short:  "dlc KIND list, or dlc KIND get NAME: dlc get jobs, dlc get job NAME",
		Hidden: true,
		Args:   cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			noun, _, err := root.Find(args[:1])
			if err != nil || noun == root || noun.Hidden {
				return fmt.Errorf("usage: dlc get jobs | dlc get job NAME (%q is no kind)", args[0])
			}
			verb := "list"
			if len(args) == 2 {
				verb = "get"
			}
			sub, _, err := noun.Find([]string{verb})
			if err != nil || sub == noun {
				return fmt.Errorf("dlc %s has no %s", noun.Name(), verb)
			}
			sub.SetContext(cmd.Context())
			return sub.RunE(sub, args[1:])
		},
	})
}
