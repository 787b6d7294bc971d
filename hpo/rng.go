package hpo

import (
	"math"
	"math/bits"
)

// rng is a small splitmix64 generator. The samplers use it instead of math/rand so that a
// suggestion depends only on (seed, trial id, parameter) and on nothing a Go release could
// change: the algorithm below is the whole definition of the stream.
type rng struct{ s uint64 }

const golden = 0x9e3779b97f4a7c15

// mix64 is splitmix64's finaliser, a bijective avalanche of 64 bits.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// newRNG derives an independent stream from the experiment seed, the trial id and a salt
// (a parameter name's hash, an algorithm tag).
func newRNG(seed int64, id int, salt uint64) *rng {
	h := mix64(uint64(seed) + golden)
	h = mix64(h ^ (uint64(int64(id)) + 0x632be59bd9b4e019))
	h = mix64(h ^ (salt + 0x85157af5c2d1a8c3))
	return &rng{s: h}
}

// hashString is 64-bit FNV-1a, used to salt a parameter's stream with its name so that
// adding or reordering parameters does not change the values drawn for the others.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

func (r *rng) next() uint64 {
	r.s += golden
	return mix64(r.s)
}

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 { return float64(r.next()>>11) * 0x1p-53 }

// intn returns a uniform value in [0, n) without modulo bias (Lemire's method).
func (r *rng) intn(n int) int {
	if n <= 1 {
		return 0
	}
	un := uint64(n)
	hi, lo := bits.Mul64(r.next(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.next(), un)
		}
	}
	return int(hi)
}

// norm returns a standard normal value (Box–Muller; one of the pair is discarded so the
// number of draws per call is fixed).
func (r *rng) norm() float64 {
	u := 1 - r.float64() // (0, 1]
	v := r.float64()
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
}
