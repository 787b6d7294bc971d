package client

import (
	"context"

	"github.com/opendlc/opendlc/api/recreate"
)

// JobCommand returns what recreates the job workspace/name: a dlc command line and a Go
// program that submit its spec again (package recreate; dlc job get NAME -o command).
func (c *Client) JobCommand(ctx context.Context, workspace, name string) (*recreate.Script, error) {
	j, err := c.GetJob(ctx, workspace, name)
	if err != nil {
		return nil, err
	}
	s, err := recreate.Job(&j.Spec)
	if err != nil {
		return nil, err
	}
	return &s, nil
}
