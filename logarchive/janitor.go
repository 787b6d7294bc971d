package logarchive

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// DefaultSweepEvery is how often a Janitor sweeps when Every is zero.
const DefaultSweepEvery = time.Hour

// Janitor deletes archives older than Retention, every Every: the S3 gateway
// (versitygw) does not implement bucket lifecycle rules, so the control plane expires
// its archives itself. Several janitors may sweep the same archives: deletes are
// idempotent.
type Janitor struct {
	Store *Store
	// Retention is how long an archive object is kept after it was written.
	Retention time.Duration
	// Every is the time between sweeps; default DefaultSweepEvery.
	Every time.Duration
	// Roots lists the archive roots (Root of each workspace location) to sweep.
	Roots func(ctx context.Context) ([]string, error)
	// Logger; default slog.Default().
	Logger *slog.Logger
}

// Run sweeps at once, then every Every, until ctx ends.
func (j *Janitor) Run(ctx context.Context) {
	every := j.Every
	if every <= 0 {
		every = DefaultSweepEvery
	}
	log := j.Logger
	if log == nil {
		log = slog.Default()
	}
	for {
		n, err := j.SweepOnce(ctx)
		if err != nil && ctx.Err() == nil {
			log.Warn("log archive sweep failed", "error", err)
		} else if n > 0 {
			log.Info("log archive sweep", "deleted", n, "retention", j.Retention)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// SweepOnce deletes, under every root, the archive objects written more than Retention
// ago, and returns how many it deleted. A root that fails is reported after the others
// are swept.
func (j *Janitor) SweepOnce(ctx context.Context) (int, error) {
	roots, err := j.Roots(ctx)
	if err != nil {
		return 0, err
	}
	cutoff := time.Now().Add(-j.Retention)
	total := 0
	var firstErr error
	for _, root := range roots {
		n, err := j.Store.Sweep(ctx, root, cutoff)
		total += n
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return total, firstErr
}

// WorkspaceRoots lists the archive roots of the workspaces that have a default
// location under root (s3://bucket[/prefix]): root/<ws>/logs/ for each <ws>/ found
// there.
func (s *Store) WorkspaceRoots(ctx context.Context, root string) ([]string, error) {
	bucket, prefix, err := split(root)
	if err != nil {
		return nil, err
	}
	var out []string
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			if isNotFound(err) {
				return nil, nil
			}
			return nil, fmt.Errorf("logarchive: list %s: %w", root, err)
		}
		for _, cp := range page.CommonPrefixes {
			ws := strings.TrimSuffix(aws.ToString(cp.Prefix), "/")
			out = append(out, "s3://"+bucket+"/"+ws+"/logs/")
		}
	}
	return out, nil
}
