package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/schemas"
)

// resolveToken is the token API calls send: --token, else $DLC_TOKEN, else the admin
// token `dlc up` wrote in the default state directory (when the file exists).
func (g *globals) resolveToken() string {
	if g.token != "" {
		return g.token
	}
	if t := os.Getenv("DLC_TOKEN"); t != "" {
		return t
	}
	t, err := auth.ReadTokenFile(filepath.Join(embedded.DefaultDir(), auth.AdminTokenFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "warning:", err)
		}
		return ""
	}
	return t
}

func (g *globals) caFile() string {
	if g.caCert != "" {
		return g.caCert
	}
	return os.Getenv("DLC_CA_CERT")
}

func newWhoamiCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show the token's name, workspace, role and expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			id, err := c.Whoami(cmd.Context())
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, id)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "name:       %s\nworkspace:  %s\nrole:       %s\nexpires:    %s\n",
				id.Name, id.Workspace, id.Role, expiry(id.ExpiresAt))
			return nil
		},
	}
}

func expiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format(time.RFC3339)
}

func newTokenCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Aliases: []string{"tokens"}, Short: "Manage API tokens (admin)"}
	var role string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create NAME [-w WORKSPACE] [--role viewer|member|admin] [--ttl 720h]",
		Short: "Create a token and print its secret, once: it is stored only as a hash",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.TokenRequest{Name: args[0], Workspace: g.workspace, Role: api.Role(role), TTL: schemas.Duration(ttl)}
			if req.Role == api.RoleAdmin && !cmd.Flag("workspace").Changed {
				req.Workspace = api.AllWorkspaces
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, t)
			}
			// The secret alone on stdout, so that TOKEN=$(dlc token create ...) works;
			// what it is on stderr.
			fmt.Fprintf(cmd.ErrOrStderr(), "token %s (workspace %s, role %s, expires %s); the secret is shown only now:\n",
				t.Name, t.Workspace, t.Role, expiry(t.ExpiresAt))
			fmt.Fprintln(cmd.OutOrStdout(), t.Secret)
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", string(api.RoleViewer), "viewer, member or admin (admin tokens act in every workspace)")
	create.Flags().DurationVar(&ttl, "ttl", auth.DefaultTTL, "how long the token works (at most 8784h)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List tokens (not their secrets); -w for one workspace's",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			ws := ""
			if cmd.Flag("workspace").Changed {
				ws = g.workspace
			}
			l, err := c.ListTokens(cmd.Context(), ws)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, l)
			}
			return printTokens(cmd.OutOrStdout(), l.Items)
		},
	}
	revoke := &cobra.Command{
		Use:     "revoke NAME",
		Aliases: []string{"delete"},
		Short:   "Revoke a token; it stops working at once",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.RevokeToken(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "token %s revoked\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

func printTokens(w io.Writer, toks []api.Token) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tWORKSPACE\tROLE\tEXPIRES\tCREATED BY")
	for _, t := range toks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Workspace, t.Role, expiry(t.ExpiresAt), t.CreatedBy)
	}
	return tw.Flush()
}

func newWorkspaceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workspace", Aliases: []string{"workspaces", "ws"}, Short: "Manage workspaces (create: admin)"}
	var ws api.Workspace
	create := &cobra.Command{
		Use:   "create NAME [--namespace NS] [--description TEXT]",
		Short: "Register a workspace and the Kubernetes namespace its pods run in",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ws.Name = args[0]
			c, err := g.client()
			if err != nil {
				return err
			}
			out, err := c.CreateWorkspace(cmd.Context(), ws)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, out)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "workspace %s created (namespace %s)\n", out.Name, out.Namespace)
			return nil
		},
	}
	create.Flags().StringVar(&ws.Namespace, "namespace", "", "Kubernetes namespace (default: the workspace's name)")
	create.Flags().StringVar(&ws.Description, "description", "", "what the workspace is for")
	list := &cobra.Command{
		Use:   "list",
		Short: "List the workspaces you may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.ListWorkspaces(cmd.Context())
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tNAMESPACE\tDESCRIPTION")
			for _, w := range l.Items {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", w.Name, w.Namespace, w.Description)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(create, list)
	return cmd
}
