package main

import (
	"errors"
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
	k := &kindCommands[api.PipelineRun, api.PipelineSummary]{
		noun:    "pipeline",
		aliases: []string{"pipelines"},
		short:   "Run pipelines: small DAGs of jobs and conditions (docs/pipelines.md)",

		get:      (*client.Client).GetPipeline,
		getShort: "Show a pipeline run: every step's phase, job, outputs and metrics",
		show:     printPipeline,

		list:        paged((*client.Client).ListPipelines, func(l *api.PipelineList) ([]api.PipelineSummary, string) { return l.Items, l.NextPageToken }),
		listShort:   "List the workspace's pipeline runs",
		listFilters: []string{"phase", "label"},
		columns: []column[api.PipelineSummary]{
			{"NAME", func(p api.PipelineSummary) string { return p.Name }},
			{"PHASE", func(p api.PipelineSummary) string { return string(p.Phase) }},
			{"STARTED", func(p api.PipelineSummary) string { return p.StartTime.Local().Format(time.DateTime) }},
			{"ENDED", func(p api.PipelineSummary) string {
				if p.EndTime == nil {
					return "-"
				}
				return p.EndTime.Local().Format(time.DateTime)
			}},
		},

		del:      (*client.Client).DeletePipeline,
		delShort: "Stop a pipeline run if it runs, then delete it and its step jobs (its name can be used again)",
	}
	k.more = func() []*cobra.Command {
		return []*cobra.Command{
			newPipelineRunCmd(g),
			newPipelineRetryCmd(g),
			stopCmd(g, "pipeline", "Stop a pipeline run: its running jobs are stopped, the steps not started skipped",
				"why, recorded in the run's status", (*client.Client).StopPipeline, func(r *api.PipelineStopResult) any { return r.Phase }),
		}
	}
	return k.command(g)
}

func newPipelineRunCmd(g *globals) *cobra.Command {
	var (
		file, template, name string
		params               []string
		wait                 bool
	)
	cmd := &cobra.Command{
		Use:   "run -f FILE | --template NAME --name RUN",
		Short: "Start a run of a pipeline, named by its metadata.name, or of a stored template",
		Args:  cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, _ []string) error {
			values, err := paramValues(params)
			if err != nil {
				return err
			}
			var p *api.PipelineRun
			switch {
			case (file == "") == (template == ""):
				return errors.New("give either -f FILE or --template NAME")
			case template != "" && name == "":
				return errors.New("--template needs --name: the run's name")
			case template != "":
				p, err = c.RunPipelineTemplate(cmd.Context(), g.workspace, template, name, values)
			default:
				var data []byte
				if data, err = readSpecFile(file); err == nil {
					p, err = c.RunPipeline(cmd.Context(), data, values)
				}
			}
			if err != nil {
				return err
			}
			ws, name := p.Spec.Metadata.Workspace, p.Spec.Metadata.Name
			if err := g.print(cmd, p, line("pipeline %s/%s started", ws, name)); err != nil || !wait {
				return err
			}
			return waitPipeline(cmd, c, ws, name)
		}),
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "pipeline file (YAML or JSON); - for stdin")
	cmd.Flags().StringVar(&template, "template", "", "run this stored pipeline template (dlc template) instead of a file")
	cmd.Flags().StringVar(&name, "name", "", "with --template: the run's name")
	cmd.Flags().StringArrayVarP(&params, "param", "p", nil, "NAME=VALUE: a parameter of the pipeline (repeatable)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the run until it ends; exit 1 unless it succeeded")
	return cmd
}

func newPipelineRetryCmd(g *globals) *cobra.Command {
	var (
		name string
		wait bool
	)
	cmd := &cobra.Command{
		Use:   "retry RUN",
		Short: "Start a retry of a Failed or Stopped run: a new run that reuses the succeeded steps' outputs and runs the others",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			p, err := c.RetryPipeline(cmd.Context(), g.workspace, args[0], name)
			if err != nil {
				return err
			}
			ws, run := p.Spec.Metadata.Workspace, p.Spec.Metadata.Name
			if err := g.print(cmd, p, line("pipeline %s/%s started, retrying %s", ws, run, args[0])); err != nil || !wait {
				return err
			}
			return waitPipeline(cmd, c, ws, run)
		}),
	}
	cmd.Flags().StringVar(&name, "name", "", "the retry's name (default <run>-retry-<N>, the first N free)")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the run until it ends; exit 1 unless it succeeded")
	return cmd
}

// waitPipeline follows a run until it ends, printing its steps' phases as they
// change; it exits 1 unless the run succeeded.
func waitPipeline(cmd *cobra.Command, c *client.Client, ws, name string) error {
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
		switch {
		case s.Experiment != "":
			job = "experiment " + s.Experiment
		case s.ReusedFrom != "":
			job = "reused from " + s.ReusedFrom
		case job == "":
			job = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Phase, job, started, finished, s.Message)
		// A fan-out step's children, one line each.
		for _, c := range s.Children {
			fmt.Fprintf(tw, "    [%d]\t%s\t%s\t\t\t%s\n", c.Index, c.Phase, c.Job, c.Message)
		}
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
