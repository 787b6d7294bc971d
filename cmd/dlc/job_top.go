package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/events"
)

// newTopCmd is `dlc job top NAME`: each replica's latest resource sample
// (opendlc.job.resources.v1), read from the workspace's events.
func newTopCmd(g *globals) *cobra.Command {
	var since time.Duration
	var watch bool
	cmd := &cobra.Command{
		Use:   "top NAME",
		Short: "Show what each replica of a job uses now: CPU, memory and GPUs (its latest resource sample); --watch keeps showing",
		Args:  cobra.ExactArgs(1),
		RunE: g.withClient(func(cmd *cobra.Command, c *client.Client, args []string) error {
			out := cmd.OutOrStdout()
			latest := map[string]events.ResourceData{}
			var mu sync.Mutex
			opts := client.EventOptions{Type: events.TypeJobResources, Job: args[0], Since: since}
			collect := func(ev events.Event) error {
				var d events.ResourceData
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					return fmt.Errorf("event %s: %w", ev.ID, err)
				}
				mu.Lock()
				defer mu.Unlock()
				// The newest attempt's samples replace the older's.
				for name, old := range latest {
					if old.Attempt < d.Attempt {
						delete(latest, name)
					}
				}
				if old, ok := latest[d.Replica]; !ok || old.Attempt < d.Attempt || (old.Attempt == d.Attempt && old.Seq <= d.Seq) {
					latest[d.Replica] = d
				}
				return nil
			}
			if !watch {
				if err := c.Events(cmd.Context(), g.workspace, opts, collect); err != nil {
					return err
				}
				if len(latest) == 0 {
					return fmt.Errorf("job %s: no resource sample in the last %s (a replica is sampled while it runs, every --resource-interval of the worker)", args[0], since)
				}
				return printTop(out, latest)
			}
			// --watch: follow the events, and print the table every few seconds.
			opts.Follow = true
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- c.Events(ctx, g.workspace, opts, collect) }()
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case err := <-errc:
					if cmd.Context().Err() != nil {
						return nil
					}
					return err
				case <-tick.C:
					mu.Lock()
					snapshot := maps.Clone(latest)
					mu.Unlock()
					if err := printTop(out, snapshot); err != nil {
						return err
					}
					fmt.Fprintln(out)
				}
			}
		}),
	}
	cmd.Flags().DurationVar(&since, "since", 5*time.Minute, "look this far back for the latest samples")
	cmd.Flags().BoolVar(&watch, "watch", false, "keep following the samples, printing the table every 2s")
	return cmd
}

// printTop prints one row per replica, sorted by name.
func printTop(w io.Writer, latest map[string]events.ResourceData) error {
	type row struct {
		name string
		d    events.ResourceData
	}
	var rows []row
	for name, d := range latest {
		rows = append(rows, row{name, d})
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.name, b.name) })
	return printTable(w, []column[row]{
		{"REPLICA", func(r row) string { return r.name }},
		{"ATTEMPT", func(r row) string { return strconv.Itoa(r.d.Attempt) }},
		{"NODE", func(r row) string { return dash(r.d.Node) }},
		{"CPU", func(r row) string { return fmt.Sprintf("%.2f", r.d.CPU) }},
		{"MEMORY", func(r row) string {
			s := bytesIEC(r.d.MemoryBytes)
			if r.d.MemoryLimitBytes > 0 {
				s += fmt.Sprintf(" (%.0f%% of %s)", 100*float64(r.d.MemoryBytes)/float64(r.d.MemoryLimitBytes), bytesIEC(r.d.MemoryLimitBytes))
			}
			return s
		}},
		{"GPU", func(r row) string {
			m := r.d.ResourceMetrics()
			u, ok := m[events.ResourceGPUUtilization]
			if !ok {
				return "-"
			}
			return fmt.Sprintf("%d × %.0f%%", len(r.d.GPUs), u)
		}},
		{"GPU MEMORY", func(r row) string {
			if len(r.d.GPUs) == 0 {
				return "-"
			}
			var used int64
			for _, g := range r.d.GPUs {
				used += g.MemoryUsedBytes
			}
			return bytesIEC(used)
		}},
	}, rows)
}

// bytesIEC writes n bytes as 512Mi, 1.5Gi...
func bytesIEC(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f%si", v, "KMGTP"[i:i+1])
}
