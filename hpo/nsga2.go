package hpo

import (
	"cmp"
	"math"
	"slices"
)

// NSGA2Sampler is NSGA-II (Deb et al., IEEE TEC 2002) in the form of Optuna's
// NSGAIISampler, for several objectives (History.Directions). The trials are cut, in ID
// order, into generations of PopulationSize (default 20). The first generation is
// drawn at random. The parents of generation g are the population chosen, by
// non-dominated sorting and then crowding distance, from the parents of generation g−1
// and the Completed trials of generation g−1. Each child takes two parents by binary
// tournament (lower front first, then larger crowding distance), mixes them by uniform
// crossover (each parameter from either parent; with probability 0.9, else a copy of
// the first) and resamples each parameter at random with probability 1/parameters.
// Trials that are not Completed with a finite value for every objective take no part.
// With one direction it ranks by that objective alone.
type NSGA2Sampler struct {
	o SamplerOptions
}

var _ Sampler = (*NSGA2Sampler)(nil)

// NewNSGA2 returns an NSGA-II sampler; PopulationSize sets its population.
func NewNSGA2(opts ...Option) (*NSGA2Sampler, error) {
	o, err := applySamplerOptions(opts)
	if err != nil {
		return nil, err
	}
	return &NSGA2Sampler{o: o}, nil
}

// saltNSGA2 keeps the NSGA-II sampler's stream apart.
const saltNSGA2 uint64 = 0x4e53_4741_32 // "NSGA2"

const (
	nsga2Crossover   = 0.9
	nsga2DefaultSize = 20
)

// moPoint is a trial with its objective scores (minimised).
type moPoint struct {
	t         *Trial
	scores    []float64
	violation float64 // total constraint violation (0: feasible)
	rank      int
	crowd     float64
}

// constrainedDominates is Deb's constrained domination: a feasible point dominates an
// infeasible one, the smaller violation wins between infeasible ones, and feasible
// points compare by Pareto domination.
func constrainedDominates(a, b *moPoint) bool {
	switch {
	case a.violation == 0 && b.violation > 0:
		return true
	case a.violation > 0 && b.violation == 0:
		return false
	case a.violation > 0:
		return a.violation < b.violation
	}
	return dominates(a.scores, b.scores)
}

// Suggest replays the generations before id and breeds its parameters.
func (s *NSGA2Sampler) Suggest(h History, id int) (map[string]float64, error) {
	dims, err := newDims(h.Space)
	if err != nil {
		return nil, err
	}
	size := s.o.PopulationSize
	if size <= 0 {
		size = nsga2DefaultSize
	}
	gen := id / size
	if gen == 0 {
		return randomSuggest(dims, h.Seed, id), nil
	}
	trials := finishedByID(h, id)
	var parents []moPoint
	for g := range gen {
		pool := slices.Clone(parents)
		for _, t := range trials {
			// A trial with a negative ID (a warm start's, from before this search)
			// joins the first generation's pool.
			if (t.ID >= 0 && t.ID/size != g) || (t.ID < 0 && g != 0) {
				continue
			}
			if sc, ok := moScores(h, t); ok {
				pool = append(pool, moPoint{t: t, scores: sc, violation: Violation(t)})
			}
		}
		parents = selectPopulation(pool, size)
	}
	if len(parents) < 2 {
		return randomSuggest(dims, h.Seed, id), nil
	}
	r := newRNG(h.Seed, id, saltNSGA2)
	p1, p2 := tournament(parents, r), tournament(parents, r)
	cross := r.float64() < nsga2Crossover
	mutate := 1 / float64(len(dims))
	out := randomSuggest(dims, h.Seed, id)
	for i := range dims {
		d := &dims[i]
		src := p1
		if cross && r.float64() < 0.5 {
			src = p2
		}
		if r.float64() < mutate {
			continue // keeps the random draw
		}
		if v, ok := src.t.Params[d.p.Name]; ok {
			if _, ok := d.observed(src.t.Params); ok {
				out[d.p.Name] = v
			}
		}
	}
	return out, nil
}

// directions returns h's objective directions (Direction alone when none).
func directions(h History) []Direction {
	if len(h.Directions) > 0 {
		return h.Directions
	}
	return []Direction{h.Direction}
}

// moScores returns a Completed trial's scores for every objective.
func moScores(h History, t *Trial) ([]float64, bool) {
	if t.State != TrialCompleted {
		return nil, false
	}
	dirs := directions(h)
	vals := t.Values
	if len(dirs) == 1 && len(vals) == 0 && t.Value != nil {
		vals = []float64{*t.Value}
	}
	if len(vals) != len(dirs) {
		return nil, false
	}
	out := make([]float64, len(dirs))
	for i, d := range dirs {
		out[i] = score(d, vals[i])
		if math.IsNaN(out[i]) {
			return nil, false
		}
	}
	return out, true
}

// dominates reports whether a is no worse than b everywhere and better somewhere.
func dominates(a, b []float64) bool {
	better := false
	for i := range a {
		if a[i] > b[i] {
			return false
		}
		if a[i] < b[i] {
			better = true
		}
	}
	return better
}

// sortFronts sets each point's rank (0 for the non-dominated front) and returns the
// fronts in order, each in trial-ID order.
func sortFronts(ps []moPoint) [][]int {
	n := len(ps)
	domCount := make([]int, n)
	dominated := make([][]int, n)
	for i := range n {
		for j := range n {
			if i != j && constrainedDominates(&ps[i], &ps[j]) {
				dominated[i] = append(dominated[i], j)
			} else if i != j && constrainedDominates(&ps[j], &ps[i]) {
				domCount[i]++
			}
		}
	}
	var fronts [][]int
	var cur []int
	for i := range n {
		if domCount[i] == 0 {
			cur = append(cur, i)
		}
	}
	for rank := 0; len(cur) > 0; rank++ {
		var next []int
		for _, i := range cur {
			ps[i].rank = rank
			for _, j := range dominated[i] {
				domCount[j]--
				if domCount[j] == 0 {
					next = append(next, j)
				}
			}
		}
		slices.SortFunc(cur, func(a, b int) int { return cmp.Compare(ps[a].t.ID, ps[b].t.ID) })
		fronts = append(fronts, cur)
		cur = next
	}
	return fronts
}

// crowding sets the crowding distance of the points of one front.
func crowding(ps []moPoint, front []int) {
	for _, i := range front {
		ps[i].crowd = 0
	}
	if len(front) == 0 {
		return
	}
	m := len(ps[front[0]].scores)
	idx := slices.Clone(front)
	for k := range m {
		slices.SortStableFunc(idx, func(a, b int) int {
			return cmp.Or(cmp.Compare(ps[a].scores[k], ps[b].scores[k]), cmp.Compare(ps[a].t.ID, ps[b].t.ID))
		})
		lo, hi := ps[idx[0]].scores[k], ps[idx[len(idx)-1]].scores[k]
		ps[idx[0]].crowd, ps[idx[len(idx)-1]].crowd = math.Inf(1), math.Inf(1)
		if hi == lo {
			continue
		}
		for j := 1; j < len(idx)-1; j++ {
			ps[idx[j]].crowd += (ps[idx[j+1]].scores[k] - ps[idx[j-1]].scores[k]) / (hi - lo)
		}
	}
}

// selectPopulation keeps size points: whole fronts while they fit, then the most
// spread-out points of the next front.
func selectPopulation(pool []moPoint, size int) []moPoint {
	if len(pool) == 0 {
		return nil
	}
	out := make([]moPoint, 0, size)
	for _, front := range sortFronts(pool) {
		crowding(pool, front)
		if len(out)+len(front) <= size {
			for _, i := range front {
				out = append(out, pool[i])
			}
			continue
		}
		rest := slices.Clone(front)
		slices.SortStableFunc(rest, func(a, b int) int {
			return cmp.Or(cmp.Compare(pool[b].crowd, pool[a].crowd), cmp.Compare(pool[a].t.ID, pool[b].t.ID))
		})
		for _, i := range rest[:size-len(out)] {
			out = append(out, pool[i])
		}
		break
	}
	return out
}

// tournament picks the better of two random parents.
func tournament(ps []moPoint, r *rng) moPoint {
	a, b := ps[r.intn(len(ps))], ps[r.intn(len(ps))]
	if b.rank < a.rank || (b.rank == a.rank && b.crowd > a.crowd) {
		return b
	}
	return a
}

// ParetoFront returns the feasible Completed trials of h that no other such trial
// dominates on the objectives of h.Directions (or h.Direction alone), in ID order.
func ParetoFront(h History) []Trial {
	var ps []moPoint
	for i := range h.Trials {
		t := &h.Trials[i]
		if sc, ok := moScores(h, t); ok && Feasible(t) {
			ps = append(ps, moPoint{t: t, scores: sc})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	var out []Trial
	for _, i := range sortFronts(ps)[0] {
		out = append(out, *ps[i].t)
	}
	return out
}
