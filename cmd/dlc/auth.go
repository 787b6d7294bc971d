package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/client"
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
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			id, err := c.Whoami(cmd.Context())
			if err != nil {
				return err
			}
			return g.print(cmd, id, line("name:       %s\nworkspace:  %s\nrole:       %s\nexpires:    %s",
				id.Name, id.Workspace, id.Role, expiry(id.ExpiresAt)))
		}),
	}
}

func expiry(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.Local().Format(time.RFC3339)
}

func newTokenCmd(g *globals) *cobra.Command {
	k := &kindCommands[api.Token, api.Token]{
		noun:    "token",
		aliases: []string{"tokens"},
		short:   "Manage API tokens (admin)",

		list:              whole((*client.Client).ListTokens, func(l *api.TokenList) []api.Token { return l.Items }),
		listShort:         "List tokens (not their secrets); -w for one workspace's",
		listAllWorkspaces: true,
		columns: []column[api.Token]{
			{"NAME", func(t api.Token) string { return t.Name }},
			{"WORKSPACE", func(t api.Token) string { return t.Workspace }},
			{"ROLE", func(t api.Token) string { return string(t.Role) }},
			{"EXPIRES", func(t api.Token) string { return expiry(t.ExpiresAt) }},
			{"CREATED BY", func(t api.Token) string { return t.CreatedBy }},
		},

		del:      func(c *client.Client, ctx context.Context, _, name string) error { return c.RevokeToken(ctx, name) },
		delVerb:  "revoke",
		delAlias: []string{"delete"},
		delShort: "Revoke a token; it stops working at once",
		delPast:  "revoked",
	}
	k.more = func() []*cobra.Command { return []*cobra.Command{newTokenCreateCmd(g)} }
	return k.command(g)
}

func newTokenCreateCmd(g *globals) *cobra.Command {
	var role string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create NAME [-w WORKSPACE] [--role viewer|member|workspace-admin|admin] [--ttl 720h]",
		Short: "Create a token and print its secret, once: it is stored only as a hash",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			req := api.TokenRequest{Name: args[0], Workspace: g.workspace, Role: api.Role(role), TTL: schemas.Duration(ttl)}
			if req.Role == api.RoleAdmin && !cmd.Flag("workspace").Changed {
				req.Workspace = api.AllWorkspaces
			}
			t, err := c.CreateToken(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(cmd, t, func(w io.Writer) error {
				// The secret alone on stdout, so that TOKEN=$(dlc token create ...) works;
				// what it is on stderr.
				fmt.Fprintf(cmd.ErrOrStderr(), "token %s (workspace %s, role %s, expires %s); the secret is shown only now:\n",
					t.Name, t.Workspace, t.Role, expiry(t.ExpiresAt))
				_, err := fmt.Fprintln(w, t.Secret)
				return err
			})
		}),
	}
	cmd.Flags().StringVar(&role, "role", string(api.RoleViewer), "viewer, member, workspace-admin (manages its workspace's tokens) or admin (acts in every workspace)")
	cmd.Flags().DurationVar(&ttl, "ttl", auth.DefaultTTL, "how long the token works (at most 8784h)")
	return cmd
}

func newWorkspaceCmd(g *globals) *cobra.Command {
	k := &kindCommands[api.Workspace, api.Workspace]{
		noun:    "workspace",
		aliases: []string{"workspaces", "ws"},
		short:   "Manage workspaces (create, delete: admin)",

		get: func(c *client.Client, ctx context.Context, _, name string) (*api.Workspace, error) {
			return c.GetWorkspace(ctx, name)
		},
		getShort: "Show a workspace",
		show: func(w io.Writer, ws *api.Workspace) error {
			return printTable(w, workspaceColumns, []api.Workspace{*ws})
		},

		list: whole(func(c *client.Client, ctx context.Context, _ string) (*api.WorkspaceList, error) {
			return c.ListWorkspaces(ctx)
		},
			func(l *api.WorkspaceList) []api.Workspace { return l.Items }),
		listShort: "List the workspaces you may see",
		columns:   workspaceColumns,

		del:      func(c *client.Client, ctx context.Context, _, name string) error { return c.DeleteWorkspace(ctx, name) },
		delShort: "Delete a workspace and revoke its tokens (admin); refused while it holds jobs, experiments, pipelines or schedules",
	}
	k.more = func() []*cobra.Command { return []*cobra.Command{newWorkspaceCreateCmd(g)} }
	return k.command(g)
}

var workspaceColumns = []column[api.Workspace]{
	{"NAME", func(w api.Workspace) string { return w.Name }},
	{"NAMESPACE", func(w api.Workspace) string { return w.Namespace }},
	{"DESCRIPTION", func(w api.Workspace) string { return w.Description }},
}

func newWorkspaceCreateCmd(g *globals) *cobra.Command {
	var ws api.Workspace
	var pod schemas.PodDefaults
	var locations []string
	cmd := g.nameCmd("create NAME [--namespace NS] [--service-account SA] [--image-pull-secret S]... [--security restricted] [--storage-location s3://BUCKET[/PREFIX]]... [--description TEXT]",
		"Register a workspace, the Kubernetes namespace its pods run in and their defaults",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			ws.Name = name
			if pod.ServiceAccountName != "" || len(pod.ImagePullSecrets) > 0 || pod.Security != "" {
				ws.PodDefaults = &pod
			}
			if len(locations) > 0 {
				ws.Storage = &api.WorkspaceStorage{Locations: locations}
			}
			out, err := c.CreateWorkspace(cmd.Context(), ws)
			if err != nil {
				return nil, nil, err
			}
			return out, line("workspace %s created (namespace %s)", out.Name, out.Namespace), nil
		})
	cmd.Flags().StringVar(&ws.Namespace, "namespace", "", "Kubernetes namespace (default: the workspace's name)")
	cmd.Flags().StringVar(&pod.ServiceAccountName, "service-account", "", "service account (of the namespace) of the workspace's pods whose job names none")
	cmd.Flags().StringArrayVar(&pod.ImagePullSecrets, "image-pull-secret", nil, "image pull secret (of the namespace) of every pod of the workspace; repeatable")
	cmd.Flags().StringVar(&pod.Security, "security", "", "restricted: the workspace's pods run under the restricted Pod Security Standard whatever their pool says")
	cmd.Flags().StringArrayVar(&locations, "storage-location", nil, storageLocationUsage)
	cmd.Flags().StringVar(&ws.Description, "description", "", "what the workspace is for")
	return cmd
}
