package main

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Model is a logistic regression: P(label=1 | x) = sigmoid(W·x + B).
type Model struct {
	W []float64 `json:"w"`
	B float64   `json:"b"`
}

// NewModel returns a model of n features with every parameter zero, so every rank starts
// from the same point without exchanging anything.
func NewModel(n int) Model { return Model{W: make([]float64, n)} }

// prob is P(label=1 | x).
func (m Model) prob(x []float64) float64 {
	z := m.B
	for j, w := range m.W {
		z += w * x[j]
	}
	return sigmoid(z)
}

func sigmoid(z float64) float64 {
	if z >= 0 {
		return 1 / (1 + math.Exp(-z))
	}
	e := math.Exp(z) // stable for large negative z
	return e / (1 + e)
}

// Loss is the mean log-loss (cross-entropy) over d, without the L2 penalty. An empty data
// set has loss 0.
func (m Model) Loss(d *Dataset) float64 {
	if d.Len() == 0 {
		return 0
	}
	const eps = 1e-12 // keeps log finite when the model is certain and wrong
	sum := 0.0
	for i, x := range d.X {
		p := m.prob(x)
		if d.Y[i] == 1 {
			sum -= math.Log(math.Max(p, eps))
		} else {
			sum -= math.Log(math.Max(1-p, eps))
		}
	}
	return sum / float64(d.Len())
}

// Accuracy is the share of rows of d classified right at threshold 0.5.
func (m Model) Accuracy(d *Dataset) float64 {
	if d.Len() == 0 {
		return 0
	}
	right := 0
	for i, x := range d.X {
		pred := 0.0
		if m.prob(x) >= 0.5 {
			pred = 1
		}
		if pred == d.Y[i] {
			right++
		}
	}
	return float64(right) / float64(d.Len())
}

// Hyper are the hyper-parameters of one epoch of mini-batch gradient descent.
type Hyper struct {
	LR        float64
	BatchSize int
	L2        float64
}

// TrainEpoch makes one pass over d in an order drawn from rng, one gradient step per
// mini-batch, and returns the number of steps taken. The L2 penalty applies to W, not B.
func (m *Model) TrainEpoch(d *Dataset, h Hyper, rng *rand.Rand) int {
	order := rng.Perm(d.Len())
	grad := make([]float64, len(m.W))
	steps := 0
	for start := 0; start < len(order); start += h.BatchSize {
		batch := order[start:min(start+h.BatchSize, len(order))]
		clear(grad)
		gradB := 0.0
		for _, i := range batch {
			x := d.X[i]
			r := m.prob(x) - d.Y[i] // d loss / d logit
			for j := range grad {
				grad[j] += r * x[j]
			}
			gradB += r
		}
		n := float64(len(batch))
		for j := range m.W {
			m.W[j] -= h.LR * (grad[j]/n + h.L2*m.W[j])
		}
		m.B -= h.LR * gradB / n
		steps++
	}
	return steps
}

// Check reports whether the model fits data of n features and holds only finite numbers.
func (m Model) Check(n int) error {
	if len(m.W) != n {
		return fmt.Errorf("model has %d weights, the data has %d features", len(m.W), n)
	}
	for _, v := range append([]float64{m.B}, m.W...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("model holds %v: training diverged (try a smaller --lr)", v)
		}
	}
	return nil
}

// weightedAverage returns the average of models weighted by counts, as data-parallel
// training does with replicas that saw different numbers of rows. Summation runs in the
// given order, so every caller that passes the same inputs gets the same bits.
func weightedAverage(models []Model, counts []int) Model {
	avg := NewModel(len(models[0].W))
	total := 0
	for _, c := range counts {
		total += c
	}
	for k, m := range models {
		f := 1 / float64(len(models)) // no rows anywhere: a plain mean
		if total > 0 {
			f = float64(counts[k]) / float64(total)
		}
		for j, w := range m.W {
			avg.W[j] += f * w
		}
		avg.B += f * m.B
	}
	return avg
}
