package main

import (
	"fmt"
	"strings"

	"github.com/opendlc/opendlc/client"
	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

func newCloneCmd(g *globals) *cobra.Command {
	var name string
	var sets []string
	cmd := &cobra.Command{
		Use:   "clone JOB --name NEW [--set PATH=VALUE]...",
		Short: "Start a new job from an existing one's spec, with overrides",
		Long: "Start a new job from an existing one's spec. Each --set PATH=VALUE overrides one field of the\n" +
			"spec document, for example --set spec.roles.worker.replicas=8 --set 'spec.args=[--lr, \"0.01\"]';\n" +
			"VALUE is YAML.",
		Args: cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			overrides, err := overridesFromSets(sets)
			if err != nil {
				return err
			}
			j, err := c.CloneJob(cmd.Context(), g.workspace, args[0], name, overrides)
			if err != nil {
				return err
			}
			return g.print(cmd, j, line("job %s/%s cloned from %s (uid %s)", j.Spec.Metadata.Workspace, j.Spec.Metadata.Name, args[0], j.UID))
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the new job's name")
	cmd.Flags().StringArrayVar(&sets, "set", nil, "override PATH=VALUE (YAML value); repeatable")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// overridesFromSets turns PATH=VALUE pairs into a JSON merge patch.
func overridesFromSets(sets []string) (map[string]any, error) {
	if len(sets) == 0 {
		return nil, nil
	}
	patch := map[string]any{}
	for _, s := range sets {
		path, raw, ok := strings.Cut(s, "=")
		if !ok || path == "" {
			return nil, fmt.Errorf("--set %q: want PATH=VALUE", s)
		}
		var v any
		if err := yaml.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("--set %s: value: %w", path, err)
		}
		keys := strings.Split(path, ".")
		m := patch
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[keys[len(keys)-1]] = v
	}
	return patch, nil
}
