package hpo

// RandomSampler draws every parameter independently: uniformly, log-uniformly on a log
// scale, uniformly over the grid points of a quantised parameter and over the values of
// a categorical one. It ignores the trials of the history.
type RandomSampler struct{}

var _ Sampler = (*RandomSampler)(nil)

// NewRandom returns a random sampler. It has no options of its own; the others are
// accepted and ignored so that New can pass the same list to every sampler.
func NewRandom(opts ...Option) (*RandomSampler, error) {
	if _, err := applySamplerOptions(opts); err != nil {
		return nil, err
	}
	return &RandomSampler{}, nil
}

// Suggest draws trial id's parameters from a stream seeded by (h.Seed, id, parameter
// name).
func (s *RandomSampler) Suggest(h History, id int) (map[string]float64, error) {
	dims, err := newDims(h.Space)
	if err != nil {
		return nil, err
	}
	return randomSuggest(dims, h.Seed, id), nil
}

// Salts that keep the streams of different algorithms apart.
const (
	saltRandom uint64 = 0x5241_4e44 // "RAND"
	saltTPE    uint64 = 0x5450_4500 // "TPE"
)
