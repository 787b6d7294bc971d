package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

// The CLI's grammar is noun first: `dlc KIND VERB [NAME]`. Every kind of object is
// declared once as a kindCommands value, which makes the verbs all kinds share (apply,
// get, list, delete) from the kind's SDK calls and table columns; a kind adds its own
// verbs (job logs, schedule pause...) in more.

// cliKind declares a kind of document to the CLI: the command that makes its noun
// (schemas.Info(kind).Noun) with its verbs, from the kind's kindCommands value.
type cliKind struct {
	kind    schemas.Kind
	command func(*globals) *cobra.Command
}

// cliKinds are the kinds the CLI has a noun for, each declared once.
// TestEveryKindHasANoun ranges over schemas.Kinds() and fails for a kind missing here.
var cliKinds = registerCLIKinds(
	cliKind{schemas.KindTrainingJob, newJobCmd},           // jobs.go
	cliKind{schemas.KindExperiment, newExperimentCmd},     // experiment.go
	cliKind{schemas.KindSchedule, newScheduleCmd},         // schedule.go
	cliKind{schemas.KindPipeline, newPipelineCmd},         // pipeline.go
	cliKind{schemas.KindTrigger, newTriggerCmd},           // trigger.go
	cliKind{schemas.KindNotificationRule, newRuleCmd},     // rules.go
	cliKind{schemas.KindPipelineTemplate, newTemplateCmd}, // template.go
)

// registerCLIKinds refuses a declaration without its command: the package does not
// load, and its tests say why.
func registerCLIKinds(ks ...cliKind) []cliKind {
	for _, k := range ks {
		if k.command == nil {
			panic(fmt.Sprintf("dlc: kind %s declares no command", k.kind))
		}
	}
	return ks
}

// kindNouns makes the noun of every kind.
func kindNouns(g *globals) []*cobra.Command {
	var out []*cobra.Command
	for _, k := range cliKinds {
		out = append(out, k.command(g))
	}
	return out
}

// kindCommands declares one kind of object to the CLI. T is the object the SDK's get and
// apply return, I an item of its list. A nil SDK call leaves its verb out. The calls take
// the client first, so that method expressions such as (*client.Client).GetJob fit.
type kindCommands[T, I any] struct {
	noun    string   // singular: "job"
	aliases []string // the plural and short forms: "jobs"
	short   string

	// apply creates (or replaces) an object from a spec file, -f FILE.
	apply        func(c *client.Client, ctx context.Context, spec []byte) (*T, error)
	applyVerb    string   // the verb's name; default "apply"
	applyAliases []string // other names of the verb
	applyShort   string
	applied      func(obj *T) string // the line apply prints (table output)
	// applyFlags and afterApply add to apply: a --wait flag and what it does.
	applyFlags func(f *pflag.FlagSet)
	afterApply func(cmd *cobra.Command, c *client.Client, obj *T) error

	get      func(c *client.Client, ctx context.Context, workspace, name string) (*T, error)
	getShort string
	getFlags func(f *pflag.FlagSet)
	show     func(w io.Writer, obj *T) error // get's table output; nil: the object as YAML
	// getFormats are get's -o formats beyond table, yaml and json (job: command).
	getFormats map[string]func(w io.Writer, obj *T) error
	view       func(obj *T) any // what get -o yaml|json prints; nil: the object

	// list returns a page of the workspace's objects and the next page's token ("" on
	// the last page); the list command reads every page.
	list              listFunc[I]
	listShort         string
	listFilters       []string // the filter flags it takes: phase, label, framework
	listAllWorkspaces bool     // without -w, list every workspace's objects (workspace "")
	columns           []column[I]

	del      func(c *client.Client, ctx context.Context, workspace, name string) error
	delVerb  string   // default "delete"
	delAlias []string // other names of the verb
	delShort string
	delPast  string // "deleted" by default: "job NAME deleted"

	// more makes the kind's other verbs.
	more func() []*cobra.Command
}

// listFunc lists one page.
type listFunc[I any] func(c *client.Client, ctx context.Context, workspace string, opts client.ListOptions) (items []I, next string, err error)

// paged adapts an SDK list call and its list type to a listFunc.
func paged[L, I any](list func(*client.Client, context.Context, string, client.ListOptions) (*L, error), page func(*L) ([]I, string)) listFunc[I] {
	return func(c *client.Client, ctx context.Context, ws string, opts client.ListOptions) ([]I, string, error) {
		l, err := list(c, ctx, ws, opts)
		if err != nil {
			return nil, "", err
		}
		items, next := page(l)
		return items, next, nil
	}
}

// whole adapts an SDK list call that answers all the items at once to a listFunc.
func whole[L, I any](list func(*client.Client, context.Context, string) (*L, error), items func(*L) []I) listFunc[I] {
	return paged(func(c *client.Client, ctx context.Context, ws string, _ client.ListOptions) (*L, error) {
		return list(c, ctx, ws)
	},
		func(l *L) ([]I, string) { return items(l), "" })
}

// column is one column of a list table.
type column[I any] struct {
	header string
	value  func(I) string
}

// command makes the kind's noun with all its verbs.
func (k *kindCommands[T, I]) command(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: k.noun, Aliases: k.aliases, Short: k.short}
	for _, sub := range []*cobra.Command{k.applyCmd(g), k.getCmd(g), k.listCmd(g), k.deleteCmd(g)} {
		if sub != nil {
			cmd.AddCommand(sub)
		}
	}
	if k.more != nil {
		cmd.AddCommand(k.more()...)
	}
	return cmd
}

func (k *kindCommands[T, I]) applyCmd(g *globals) *cobra.Command {
	if k.apply == nil {
		return nil
	}
	var file string
	verb := k.applyVerb
	if verb == "" {
		verb = "apply"
	}
	cmd := &cobra.Command{
		Use:     verb + " -f FILE",
		Aliases: k.applyAliases,
		Short:   k.applyShort,
		Args:    cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			obj, err := k.apply(c, cmd.Context(), data)
			if err != nil {
				return err
			}
			if err := g.print(cmd, obj, line("%s", k.applied(obj))); err != nil {
				return err
			}
			if k.afterApply != nil {
				return k.afterApply(cmd, c, obj)
			}
			return nil
		}),
	}
	fileFlag(cmd, &file, k.noun)
	if k.applyFlags != nil {
		k.applyFlags(cmd.Flags())
	}
	return cmd
}

func (k *kindCommands[T, I]) getCmd(g *globals) *cobra.Command {
	if k.get == nil {
		return nil
	}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: k.getShort,
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			obj, err := k.get(c, cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			if f, ok := k.getFormats[g.output]; ok {
				return f(cmd.OutOrStdout(), obj)
			}
			var v any = obj
			if k.view != nil {
				v = k.view(obj)
			}
			if k.show == nil {
				return printObject(cmd.OutOrStdout(), g.format("yaml"), v)
			}
			return g.print(cmd, v, func(w io.Writer) error { return k.show(w, obj) })
		}),
	}
	if k.getFlags != nil {
		k.getFlags(cmd.Flags())
	}
	return cmd
}

func (k *kindCommands[T, I]) listCmd(g *globals) *cobra.Command {
	if k.list == nil {
		return nil
	}
	var opts client.ListOptions
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   k.listShort,
		Args:    cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			ws := g.workspace
			if k.listAllWorkspaces && !cmd.Flag("workspace").Changed {
				ws = ""
			}
			var all []I
			for o := opts; ; {
				items, next, err := k.list(c, cmd.Context(), ws, o)
				if err != nil {
					return err
				}
				all = append(all, items...)
				if o.PageToken = next; next == "" {
					break
				}
			}
			list := struct {
				Items []I `json:"items"`
			}{all}
			return g.print(cmd, list, func(w io.Writer) error { return printTable(w, k.columns, all) })
		}),
	}
	k.filterFlags(cmd.Flags(), &opts)
	return cmd
}

// filterFlags registers the list's filter flags into opts.
func (k *kindCommands[T, I]) filterFlags(f *pflag.FlagSet, opts *client.ListOptions) {
	for _, filter := range k.listFilters {
		switch filter {
		case "phase":
			f.StringVar(&opts.Phase, "phase", "", "only "+k.noun+"s in this phase")
		case "framework":
			f.StringVar(&opts.Framework, "framework", "", "only "+k.noun+"s of this framework")
		case "label":
			f.StringArrayVarP(&opts.Labels, "label", "l", nil, "only "+k.noun+"s with this label KEY=VALUE; repeatable")
			// --selector, the flag's name in pipeline list before.
			f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
				if name == "selector" {
					name = "label"
				}
				return pflag.NormalizedName(name)
			})
		}
	}
}

func (k *kindCommands[T, I]) deleteCmd(g *globals) *cobra.Command {
	if k.del == nil {
		return nil
	}
	verb, past := k.delVerb, k.delPast
	if verb == "" {
		verb = "delete"
	}
	if past == "" {
		past = "deleted"
	}
	return g.nameCmd(verb+" NAME", k.delShort, func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
		return nil, line("%s %s %s", k.noun, name, past), k.del(c, cmd.Context(), g.workspace, name)
	}, k.delAlias...)
}

// printTable writes items as a table of cols.
func printTable[I any](w io.Writer, cols []column[I], items []I) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = c.header
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	for _, it := range items {
		for i, c := range cols {
			cells[i] = c.value(it)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// withClient makes a command's RunE that needs the API: the one place the client is made.
func (g *globals) withClient(fn func(cmd *cobra.Command, c *client.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := g.client()
		if err != nil {
			return err
		}
		return fn(cmd, c, args)
	}
}

// nameCmd makes `VERB NAME`: fn calls the API and returns the object -o yaml|json prints
// (nil for none: the table output then) and the table output.
func (g *globals) nameCmd(use, short string, fn func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error), aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use:     use,
		Aliases: aliases,
		Short:   short,
		Args:    cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			v, table, err := fn(cmd, c, args[0])
			if err != nil {
				return err
			}
			return g.print(cmd, v, table)
		}),
	}
}

// print writes v as YAML or JSON when -o asks for it, else (or when v is nil) the table
// output.
func (g *globals) print(cmd *cobra.Command, v any, table func(io.Writer) error) error {
	if g.output == "table" || v == nil {
		return table(cmd.OutOrStdout())
	}
	return printObject(cmd.OutOrStdout(), g.output, v)
}

// format is -o, with table standing for def: for objects shown only as YAML or JSON.
func (g *globals) format(def string) string {
	if g.output == "table" {
		return def
	}
	return g.output
}

// line is a table output of one line.
func line(format string, args ...any) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := fmt.Fprintf(w, format+"\n", args...)
		return err
	}
}

// stopCmd makes `stop NAME [--reason TEXT]` of a kind whose stop call answers a phase:
// it prints "NOUN NAME: PHASE".
func stopCmd[R any](g *globals, noun, short, reasonHelp string,
	stop func(c *client.Client, ctx context.Context, workspace, name, reason string) (*R, error), phase func(*R) any) *cobra.Command {
	var reason string
	cmd := g.nameCmd("stop NAME", short, func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
		r, err := stop(c, cmd.Context(), g.workspace, name, reason)
		if err != nil {
			return nil, nil, err
		}
		return r, line("%s %s: %s", noun, name, phase(r)), nil
	})
	cmd.Flags().StringVar(&reason, "reason", "", reasonHelp)
	return cmd
}
