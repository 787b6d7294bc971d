package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/schemas"
)

func newTemplateCmd(g *globals) *cobra.Command {
	k := &kindCommands[schemas.StoredPipelineTemplate, schemas.StoredPipelineTemplate]{
		noun:    "template",
		aliases: []string{"templates", "pipeline-template"},
		short:   "Manage stored pipeline templates: pipelines kept by name, run by name (docs/pipelines.md)",

		apply:      (*client.Client).ApplyPipelineTemplate,
		applyShort: "Create or replace a pipeline template",
		applied: func(t *schemas.StoredPipelineTemplate) string {
			return fmt.Sprintf("pipeline template %s/%s applied: %d steps", t.Metadata.Workspace, t.Metadata.Name, len(t.Spec.Steps))
		},

		get:      (*client.Client).GetPipelineTemplate,
		getShort: "Print a pipeline template",

		list: whole((*client.Client).ListPipelineTemplates, func(l *api.PipelineTemplateList) []schemas.StoredPipelineTemplate {
			return l.Items
		}),
		listShort: "List the workspace's pipeline templates",
		columns: []column[schemas.StoredPipelineTemplate]{
			{"NAME", func(t schemas.StoredPipelineTemplate) string { return t.Metadata.Name }},
			{"PARAMS", func(t schemas.StoredPipelineTemplate) string {
				names := make([]string, len(t.Spec.Params))
				for i, p := range t.Spec.Params {
					names[i] = p.Name
				}
				return strings.Join(names, ",")
			}},
			{"STEPS", func(t schemas.StoredPipelineTemplate) string { return strconv.Itoa(len(t.Spec.Steps)) }},
		},

		del:      (*client.Client).DeletePipelineTemplate,
		delShort: "Delete a pipeline template (its runs are not changed)",
	}
	k.more = func() []*cobra.Command { return []*cobra.Command{newTemplateRunCmd(g)} }
	return k.command(g)
}

func newTemplateRunCmd(g *globals) *cobra.Command {
	var (
		name   string
		params []string
		wait   bool
	)
	cmd := &cobra.Command{
		Use:   "run TEMPLATE --name RUN",
		Short: "Start a pipeline run of a stored template's spec as it is now",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			values, err := paramValues(params)
			if err != nil {
				return err
			}
			p, err := c.RunPipelineTemplate(cmd.Context(), g.workspace, args[0], name, values)
			if err != nil {
				return err
			}
			ws, run := p.Spec.Metadata.Workspace, p.Spec.Metadata.Name
			if err := g.print(cmd, p, line("pipeline %s/%s started from template %s", ws, run, args[0])); err != nil || !wait {
				return err
			}
			return waitPipeline(cmd, c, ws, run)
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the run's name (required)")
	cmd.Flags().StringArrayVarP(&params, "param", "p", nil, "NAME=VALUE: a parameter of the template (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the run until it ends; exit 1 unless it succeeded")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// paramValues parses NAME=VALUE flags.
func paramValues(params []string) (map[string]string, error) {
	values := map[string]string{}
	for _, kv := range params {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q: want NAME=VALUE", kv)
		}
		values[k] = v
	}
	return values, nil
}
