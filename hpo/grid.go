package hpo

import (
	"fmt"
	"math"
	"slices"
)

// GridSampler enumerates the Cartesian product of every parameter's values, the last
// parameter of the space varying fastest: a categorical parameter's values in order, an
// int's Min, Min+Step, ... up to Max (Step defaults to 1), a float's Min + k*Step or, when
// it has no Step, GridPoints points evenly spaced (log-spaced on a log scale) from Min to
// Max. Trial id gets grid point number id; past the last point Suggest returns
// ErrExhausted.
type GridSampler struct {
	points int
}

var _ Sampler = (*GridSampler)(nil)

// NewGrid returns a grid sampler. It reads the GridPoints option.
func NewGrid(opts ...Option) (*GridSampler, error) {
	o, err := applySamplerOptions(opts)
	if err != nil {
		return nil, err
	}
	return &GridSampler{points: o.GridPoints}, nil
}

// Size returns the number of points in space's grid, or an error when a float parameter
// has neither a Step nor a GridPoints setting. A grid of more than MaxInt points reports
// MaxInt.
func (g *GridSampler) Size(space Space) (int, error) {
	axes, err := g.axes(space)
	if err != nil {
		return 0, err
	}
	n := 1
	for _, a := range axes {
		if n > math.MaxInt/len(a) {
			return math.MaxInt, nil
		}
		n *= len(a)
	}
	return n, nil
}

// Suggest returns grid point number id.
func (g *GridSampler) Suggest(h History, id int) (map[string]float64, error) {
	axes, err := g.axes(h.Space)
	if err != nil {
		return nil, err
	}
	if id < 0 {
		return nil, fmt.Errorf("hpo: grid: negative trial id %d", id)
	}
	out := make(map[string]float64, len(axes))
	rest := id
	for i, axe := range slices.Backward(axes) {
		n := len(axe)
		out[h.Space[i].Name] = axe[rest%n]
		rest /= n
	}
	if rest > 0 {
		return nil, ErrExhausted
	}
	return out, nil
}

// maxAxis bounds the values of one parameter of a grid, which the sampler lists
// (8 MiB of values).
const maxAxis = 1 << 20

// axes lists each parameter's grid values, in space order.
func (g *GridSampler) axes(space Space) ([][]float64, error) {
	dims, err := newDims(space)
	if err != nil {
		return nil, err
	}
	axes := make([][]float64, len(dims))
	for i := range dims {
		d := &dims[i]
		switch {
		case d.cat:
			axes[i] = make([]float64, d.n)
			for k := range axes[i] {
				axes[i][k] = float64(k)
			}
		case d.q > 0:
			if d.kmax+1 > maxAxis {
				return nil, fmt.Errorf("hpo: grid: parameter %q has %d values; a grid axis may have at most %d", d.p.Name, d.kmax+1, maxAxis)
			}
			axes[i] = make([]float64, d.kmax+1)
			for k := range axes[i] {
				axes[i][k] = d.valueAt(k)
			}
		case g.points >= 2:
			axes[i] = make([]float64, g.points)
			lo, hi := d.t(d.p.Min), d.t(d.p.Max)
			for k := range axes[i] {
				x := lo + (hi-lo)*float64(k)/float64(g.points-1)
				axes[i][k] = d.value(x)
			}
			axes[i][0], axes[i][g.points-1] = d.p.Min, d.p.Max
		default:
			return nil, fmt.Errorf("hpo: grid: float parameter %q needs a step or the GridPoints option", d.p.Name)
		}
	}
	return axes, nil
}
