package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
)

func newPipelineCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "pipeline",
		Aliases: []string{"pipelines"},
		Short:   "Run pipelines: small DAGs of jobs and conditions (docs/pipelines.md)",
	}
	var (
		file   string
		params []string
		wait   bool
	)
	run := &cobra.Command{
		Use:   "run -f FILE",
		Short: "Start a run of a pipeline, named by its metadata.name",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			values := map[string]string{}
			for _, kv := range params {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return fmt.Errorf("--param %q: want NAME=VALUE", kv)
				}
				values[k] = v
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.RunPipeline(cmd.Context(), data, values)
			if err != nil {
				return err
			}
			ws, name := p.Spec.Metadata.Workspace, p.Spec.Metadata.Name
			fmt.Fprintf(cmd.OutOrStdout(), "pipeline %s/%s started\n", ws, name)
			if !wait {
				return nil
			}
			final, err := c.WaitPipeline(cmd.Context(), ws, name, time.Second, func(p *api.PipelineRun) {
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s  %s\n", time.Now().Format("15:04:05"), p.Status.Phase, stepSummary(p))
			})
			if err != nil {
				return err
			}
			if final.Status.Phase != "Succeeded" {
				fmt.Fprintf(cmd.ErrOrStderr(), "pipeline %s: %s\n", final.Status.Phase, final.Status.Message)
				return exitError{code: 1}
			}
			return nil
		},
	}
	run.Flags().StringVarP(&file, "file", "f", "", "pipeline file (YAML or JSON); - for stdin")
	run.Flags().StringArrayVarP(&params, "param", "p", nil, "NAME=VALUE: a parameter of the pipeline (repeatable)")
	run.Flags().BoolVar(&wait, "wait", false, "follow the run until it ends; exit 1 unless it succeeded")
	_ = run.MarkFlagRequired("file")

	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a pipeline run: every step's phase, job, outputs and metrics",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			p, err := c.GetPipeline(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, p)
			}
			return printPipeline(cmd.OutOrStdout(), p)
		},
	}
	var phase string
	var labels []string
	list := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's pipeline runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.ListPipelines(cmd.Context(), g.workspace, client.ListOptions{Phase: phase, Labels: labels})
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPHASE\tSTARTED\tENDED")
			for _, p := range l.Items {
				ended := "-"
				if p.EndTime != nil {
					ended = p.EndTime.Local().Format(time.DateTime)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, p.Phase, p.StartTime.Local().Format(time.DateTime), ended)
			}
			return tw.Flush()
		},
	}
	list.Flags().StringVar(&phase, "phase", "", "only runs in this phase")
	list.Flags().StringArrayVarP(&labels, "selector", "l", nil, "key=value label filter (repeatable)")
	var reason string
	stop := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a pipeline run: its running jobs are stopped, the steps not started skipped",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			r, err := c.StopPipeline(cmd.Context(), g.workspace, args[0], reason)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pipeline %s: %s\n", args[0], r.Phase)
			return nil
		},
	}
	stop.Flags().StringVar(&reason, "reason", "", "why, recorded in the run's status")
	cmd.AddCommand(run, get, list, stop)
	return cmd
}

// stepSummary is "step:phase" for every step.
func stepSummary(p *api.PipelineRun) string {
	parts := make([]string, len(p.Status.Steps))
	for i, s := range p.Status.Steps {
		parts[i] = s.Name + ":" + string(s.Phase)
	}
	return strings.Join(parts, " ")
}

func printPipeline(w io.Writer, p *api.PipelineRun) error {
	st := p.Status
	fmt.Fprintf(w, "Name:       %s\nWorkspace:  %s\nUID:        %s\nPhase:      %s\n", p.Spec.Metadata.Name,
		p.Spec.Metadata.Workspace, p.UID, st.Phase)
	if st.Message != "" {
		fmt.Fprintf(w, "Message:    %s\n", st.Message)
	}
	if len(st.Params) > 0 {
		fmt.Fprintln(w, "Params:")
		for _, prm := range p.Spec.Spec.Params {
			fmt.Fprintf(w, "  %s=%s\n", prm.Name, st.Params[prm.Name])
		}
	}
	fmt.Fprintln(w, "Steps:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  STEP\tPHASE\tJOB\tSTARTED\tFINISHED\tMESSAGE")
	for _, s := range st.Steps {
		started, finished := "-", "-"
		if s.StartTime != nil {
			started = s.StartTime.Local().Format(time.TimeOnly)
		}
		if s.FinishTime != nil {
			finished = s.FinishTime.Local().Format(time.TimeOnly)
		}
		job := s.Job
		if job == "" {
			job = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Phase, job, started, finished, s.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range st.Steps {
		if len(s.Outputs) == 0 && len(s.Metrics) == 0 {
			continue
		}
		fmt.Fprintf(w, "Step %s:\n", s.Name)
		for _, k := range sortedMapKeys(s.Outputs) {
			fmt.Fprintf(w, "  outputs.%s: %s\n", k, s.Outputs[k])
		}
		for _, k := range sortedMapKeys(s.Metrics) {
			fmt.Fprintf(w, "  metrics.%s: %g\n", k, s.Metrics[k])
		}
	}
	return nil
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func newTriggerCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "trigger",
		Aliases: []string{"triggers"},
		Short:   "Manage triggers: inbound events that start pipelines or jobs (docs/triggers.md)",
	}
	var file string
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or replace a trigger",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			data, err := readSpecFile(file)
			if err != nil {
				return err
			}
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.ApplyTrigger(cmd.Context(), data)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "trigger %s/%s applied: listening on %s\n", t.Metadata.Workspace, t.Metadata.Name, t.Spec.Subject)
			return nil
		},
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "trigger file (YAML or JSON); - for stdin")
	_ = apply.MarkFlagRequired("file")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's triggers",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			l, err := c.ListTriggers(cmd.Context(), g.workspace)
			if err != nil {
				return err
			}
			if g.output != "table" {
				return printObject(cmd.OutOrStdout(), g.output, l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSUBJECT\tFILTERS\tACTION")
			for _, t := range l.Items {
				action := "job"
				if p := t.Spec.Action.Pipeline; p != nil {
					action = fmt.Sprintf("pipeline (%d steps)", len(p.Steps))
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.Metadata.Name, t.Spec.Subject, len(t.Spec.Filter), action)
			}
			return tw.Flush()
		},
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Print a trigger",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			t, err := c.GetTrigger(cmd.Context(), g.workspace, args[0])
			if err != nil {
				return err
			}
			format := g.output
			if format == "table" {
				format = "yaml"
			}
			return printObject(cmd.OutOrStdout(), format, t)
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a trigger (what it started keeps running)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.client()
			if err != nil {
				return err
			}
			if err := c.DeleteTrigger(cmd.Context(), g.workspace, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "trigger %s deleted\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(apply, list, get, del)
	return cmd
}
