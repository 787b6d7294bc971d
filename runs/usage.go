package runs

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// bytesPerGiB is 2^30.
const bytesPerGiB = 1 << 30

// usageKey is one row of a usage answer.
type usageKey struct {
	workspace, day, label string
}

// Usage selects the attempts that overlap [From, To) in SQL and sums them in Go, the
// same on both databases: each attempt is cut to the range and split at UTC midnights,
// and each piece adds the run's demand times its hours to its (workspace, day, label)
// row. An attempt without an End runs until its record's Finished.
func (s *store) Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	to := q.To
	if to.IsZero() {
		to = time.Now()
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.To.After(q.From) {
		return nil, invalid("usage query", schemas.ErrorList{
			schemas.Invalid(schemas.NewPath("to"), "must be after from (%s)", q.From.UTC().Format(time.RFC3339Nano))})
	}
	fromUS, toUS := micros(q.From), micros(to) // a zero From is year 1: the beginning
	if fromUS >= toUS {
		return []UsageRow{}, nil
	}

	var args sqlArgs
	cols := "a.workspace, a.kind, a.uid, a.start_us, COALESCE(a.end_us, r.finished), a.gpu, a.cpu, a.memory_bytes"
	from := "attempts a JOIN runs r ON " + fmt.Sprintf(sameRun, "a")
	if q.GroupByLabel != "" {
		cols += ", COALESCE(l.value, '')"
		from += " LEFT JOIN run_labels l ON l.workspace = a.workspace AND l.kind = a.kind AND l.uid = a.uid AND l.key = " + args.add(q.GroupByLabel)
	}
	where := []string{"a.start_us < " + args.add(toUS), "COALESCE(a.end_us, r.finished) > " + args.add(fromUS)}
	if len(q.Workspaces) > 0 {
		where = append(where, args.in("a.workspace", q.Workspaces))
	}
	rows, err := s.db.QueryContext(ctx, "SELECT "+cols+" FROM "+from+" WHERE "+strings.Join(where, " AND "), args...)
	if err != nil {
		return nil, fmt.Errorf("runs: usage: %w", err)
	}
	defer rows.Close()

	sums := map[usageKey]*UsageRow{}
	runs := map[usageKey]map[[2]string]bool{}
	for rows.Next() {
		var (
			workspace, kind, uid, label string
			start, end, gpu, mem        int64
			cpu                         float64
		)
		dest := []any{&workspace, &kind, &uid, &start, &end, &gpu, &cpu, &mem}
		if q.GroupByLabel != "" {
			dest = append(dest, &label)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("runs: usage: %w", err)
		}
		start, end = max(start, fromUS), min(end, toUS)
		for start < end {
			t := fromMicros(start)
			midnight := time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
			pieceEnd := min(end, micros(midnight))
			hours := float64(pieceEnd-start) / float64(time.Hour/time.Microsecond)
			k := usageKey{workspace: workspace, day: t.Format(time.DateOnly), label: label}
			row := sums[k]
			if row == nil {
				row = &UsageRow{Workspace: workspace, Day: k.day, Label: label}
				sums[k], runs[k] = row, map[[2]string]bool{}
			}
			row.GPUHours += float64(gpu) * hours
			row.CPUHours += cpu * hours
			row.MemoryGiBHours += float64(mem) / bytesPerGiB * hours
			runs[k][[2]string{kind, uid}] = true
			start = pieceEnd
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("runs: usage: %w", err)
	}
	out := make([]UsageRow, 0, len(sums))
	for k, row := range sums {
		row.Runs = len(runs[k])
		out = append(out, *row)
	}
	slices.SortFunc(out, func(a, b UsageRow) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Workspace, b.Workspace), cmp.Compare(a.Label, b.Label))
	})
	return out, nil
}
