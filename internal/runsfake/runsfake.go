// Package runsfake is an in-memory runs.Store for unit tests of what reads run
// records (the API, the CLI, the console): it answers queries with the semantics
// runs.Query documents, over records a test puts in. It is no store for a process:
// the real ones are in package runs.
package runsfake

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opendlc/opendlc/runs"
)

// Store is an in-memory runs.Store. Its zero value is empty and ready.
type Store struct {
	mu      sync.Mutex
	records []runs.Record
	// Queries and UsageQueries are the queries asked, in order, for tests that check
	// what a caller asked for (the workspaces it scoped a query to).
	Queries      []runs.Query
	UsageQueries []runs.UsageQuery
	// Rows, when set, is what Usage answers (filtered by workspace); otherwise Usage
	// sums the attempts of the records put in.
	Rows []runs.UsageRow
}

var _ runs.Store = (*Store)(nil)

// Put adds r unless its key is there.
func (s *Store) Put(_ context.Context, r runs.Record) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, have := range s.records {
		if have.Workspace == r.Workspace && have.Kind == r.Kind && have.UID == r.UID {
			return false, nil
		}
	}
	s.records = append(s.records, r)
	return true, nil
}

// Get reads one record.
func (s *Store) Get(_ context.Context, workspace string, kind runs.Kind, uid string) (runs.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.records {
		if r.Workspace == workspace && r.Kind == kind && r.UID == uid {
			return r, nil
		}
	}
	return runs.Record{}, runs.ErrNotFound
}

// List answers q, newest first, paged with the index of the next record as cursor.
func (s *Store) List(_ context.Context, q runs.Query) (runs.Page, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Queries = append(s.Queries, q)
	var out []runs.Record
	for _, r := range s.records {
		if matches(r, q) {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b runs.Record) int {
		if c := b.Finished.Compare(a.Finished); c != 0 {
			return c
		}
		return strings.Compare(b.UID, a.UID)
	})
	start := 0
	if q.After != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(q.After, "c"))
		if err != nil {
			return runs.Page{}, err
		}
		start = min(n, len(out))
	}
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	page := runs.Page{Records: out[start:min(start+limit, len(out))]}
	if start+limit < len(out) {
		page.Next = "c" + strconv.Itoa(start+limit)
	}
	return page, nil
}

func matches(r runs.Record, q runs.Query) bool {
	switch {
	case len(q.Workspaces) > 0 && !slices.Contains(q.Workspaces, r.Workspace),
		q.Kind != "" && r.Kind != q.Kind,
		q.Name != "" && r.Name != q.Name,
		q.Phase != "" && r.Phase != q.Phase,
		!q.FinishedAfter.IsZero() && r.Finished.Before(q.FinishedAfter),
		!q.FinishedBefore.IsZero() && !r.Finished.Before(q.FinishedBefore),
		q.OriginKind != "" && r.Origin.Kind != q.OriginKind,
		q.OriginName != "" && r.Origin.Name != q.OriginName,
		q.Parent != "" && r.Parent != q.Parent:
		return false
	}
	for k, v := range q.Labels {
		if have, ok := r.Labels[k]; !ok || have != v {
			return false
		}
	}
	if q.Checkpoint != "" {
		hit := strings.HasPrefix(r.Checkpoint, q.Checkpoint)
		for _, in := range r.Inputs {
			hit = hit || strings.HasPrefix(in, q.Checkpoint)
		}
		return hit
	}
	return true
}

// Usage answers Rows, or sums the attempts of the records in q's workspaces, cut to
// [From, To), per workspace, UTC day and label value.
func (s *Store) Usage(_ context.Context, q runs.UsageQuery) ([]runs.UsageRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.UsageQueries = append(s.UsageQueries, q)
	in := func(ws string) bool { return len(q.Workspaces) == 0 || slices.Contains(q.Workspaces, ws) }
	if s.Rows != nil {
		var out []runs.UsageRow
		for _, row := range s.Rows {
			if in(row.Workspace) {
				out = append(out, row)
			}
		}
		return out, nil
	}
	type key struct{ ws, day, label string }
	rows := map[key]*runs.UsageRow{}
	seen := map[key]map[string]bool{}
	for _, r := range s.records {
		if !in(r.Workspace) {
			continue
		}
		for _, a := range r.Attempts {
			if a.End == nil {
				continue
			}
			start, end := later(a.Start, q.From), earlier(*a.End, q.To)
			for start.Before(end) {
				day := start.UTC().Truncate(24 * time.Hour)
				cut := earlier(day.Add(24*time.Hour), end)
				h := cut.Sub(start).Hours()
				k := key{r.Workspace, day.Format(time.DateOnly), ""}
				if q.GroupByLabel != "" {
					k.label = r.Labels[q.GroupByLabel]
				}
				row := rows[k]
				if row == nil {
					row = &runs.UsageRow{Workspace: k.ws, Day: k.day, Label: k.label}
					rows[k], seen[k] = row, map[string]bool{}
				}
				row.GPUHours += float64(r.Demand.GPU) * h
				row.CPUHours += r.Demand.CPU * h
				row.MemoryGiBHours += float64(r.Demand.MemoryBytes) / (1 << 30) * h
				if !seen[k][r.UID] {
					seen[k][r.UID] = true
					row.Runs++
				}
				start = cut
			}
		}
	}
	out := make([]runs.UsageRow, 0, len(rows))
	for _, k := range slices.SortedFunc(maps.Keys(rows), func(a, b key) int {
		return strings.Compare(a.ws+"\x00"+a.day+"\x00"+a.label, b.ws+"\x00"+b.day+"\x00"+b.label)
	}) {
		out = append(out, *rows[k])
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func earlier(a, b time.Time) time.Time {
	if !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// Delete removes a name's records (one uid's when set) and their children.
func (s *Store) Delete(_ context.Context, workspace string, kind runs.Kind, name, uid string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone := map[string]bool{}
	for _, r := range s.records {
		if r.Workspace == workspace && r.Kind == kind && r.Name == name && (uid == "" || r.UID == uid) {
			gone[r.UID] = true
		}
	}
	n := len(s.records)
	s.records = slices.DeleteFunc(s.records, func(r runs.Record) bool {
		return r.Workspace == workspace && (gone[r.UID] && r.Kind == kind || gone[r.Parent])
	})
	return n - len(s.records), nil
}

// Expire removes records that finished before cutoff.
func (s *Store) Expire(_ context.Context, cutoff time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.records)
	s.records = slices.DeleteFunc(s.records, func(r runs.Record) bool { return r.Finished.Before(cutoff) })
	return n - len(s.records), nil
}

// Close does nothing.
func (s *Store) Close() error { return nil }
