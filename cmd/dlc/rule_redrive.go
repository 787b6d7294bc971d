package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/client"
)

// newRedriveCmd is `dlc rule redrive RULE [--limit N] [--since T]`: the rule's dead
// letters sent again, each once.
func newRedriveCmd(g *globals) *cobra.Command {
	var limit int
	var since string
	cmd := g.nameCmd("redrive RULE", "Send a rule's dead letters again through its current target, each once however often it is run",
		func(cmd *cobra.Command, c *client.Client, name string) (any, func(io.Writer) error, error) {
			req := api.RedriveRequest{Limit: limit}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return nil, nil, err
				}
				req.Since = t.UTC().Format(time.RFC3339)
			}
			r, err := c.RedriveRule(cmd.Context(), g.workspace, name, req)
			if err != nil {
				return nil, nil, err
			}
			more := ""
			if r.More {
				more = "; more are left: run it again"
			}
			return r, line("rule %s: %d dead letters queued, %d queued before%s", name, len(r.Queued), r.AlreadyQueued, more), nil
		})
	cmd.Flags().IntVar(&limit, "limit", 0, "queue at most this many dead letters (default and at most 1000)")
	cmd.Flags().StringVar(&since, "since", "", "only dead letters written since this time: RFC 3339 (2026-01-02T15:04:05Z) or a duration ago (24h)")
	return cmd
}

// parseSince reads --since: an RFC 3339 time, or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z or a duration such as 24h", s)
}
