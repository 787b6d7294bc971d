package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func shippedData(t *testing.T) (train, test *Dataset) {
	t.Helper()
	train, test, err := loadData("")
	if err != nil {
		t.Fatal(err)
	}
	return train, test
}

func TestShippedData(t *testing.T) {
	train, test := shippedData(t)
	if train.Len() != 2000 || test.Len() != 500 || len(train.Features) != 8 {
		t.Errorf("got %d train rows, %d test rows, %d features; want 2000, 500, 8", train.Len(), test.Len(), len(train.Features))
	}
	pos := 0.0
	for _, y := range train.Y {
		pos += y
	}
	if share := pos / float64(train.Len()); share < 0.4 || share > 0.6 {
		t.Errorf("%.2f of training labels are 1; the data set should be roughly balanced", share)
	}
}

func TestTrainingLearns(t *testing.T) {
	train, test := shippedData(t)
	m := NewModel(len(train.Features))
	h := Hyper{LR: defaultParams.LR, BatchSize: defaultParams.BatchSize, L2: defaultParams.L2}

	prev := m.Loss(train) // log 2 for an all-zero model
	first := prev
	for epoch := 1; epoch <= defaultParams.Epochs; epoch++ {
		steps := m.TrainEpoch(train, h, rand.New(rand.NewPCG(1, uint64(epoch))))
		if steps != 63 { // ceil(2000 / 32)
			t.Fatalf("epoch %d took %d steps, want 63", epoch, steps)
		}
		loss := m.Loss(train)
		// Stochastic steps may wobble, but not by more than a hair at this learning rate.
		if loss > prev+1e-3 {
			t.Errorf("epoch %d: loss rose from %.4f to %.4f", epoch, prev, loss)
		}
		prev = loss
	}
	acc := m.Accuracy(test)
	t.Logf("after %d epochs: train loss %.4f (from %.4f), test accuracy %.4f", defaultParams.Epochs, prev, first, acc)
	if prev > first/2 {
		t.Errorf("loss fell only from %.4f to %.4f", first, prev)
	}
	if acc < 0.85 {
		t.Errorf("test accuracy %.4f, want >= 0.85", acc)
	}
	if err := m.Check(8); err != nil {
		t.Error(err)
	}
}

func TestDivergenceIsReported(t *testing.T) {
	train, _ := shippedData(t)
	m := NewModel(len(train.Features))
	for epoch := range 50 {
		m.TrainEpoch(train, Hyper{LR: 1e300, BatchSize: 1, L2: 1}, rand.New(rand.NewPCG(1, uint64(epoch))))
	}
	if err := m.Check(8); err == nil || !strings.Contains(err.Error(), "diverged") {
		t.Errorf("Check after training with lr=1e300, l2=1: %v, want a divergence error", err)
	}
}

func TestWeightedAverage(t *testing.T) {
	tests := map[string]struct {
		models []Model
		counts []int
		want   Model
	}{
		"one model": {
			models: []Model{{W: []float64{1, 2}, B: 3}}, counts: []int{10},
			want: Model{W: []float64{1, 2}, B: 3},
		},
		"equal shards": {
			models: []Model{{W: []float64{1, 2}, B: 0}, {W: []float64{3, 4}, B: 1}}, counts: []int{5, 5},
			want: Model{W: []float64{2, 3}, B: 0.5},
		},
		"unequal shards": {
			models: []Model{{W: []float64{0}, B: 0}, {W: []float64{4}, B: 8}}, counts: []int{3, 1},
			want: Model{W: []float64{1}, B: 2},
		},
		"no rows anywhere": {
			models: []Model{{W: []float64{2}}, {W: []float64{4}}}, counts: []int{0, 0},
			want: Model{W: []float64{3}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, weightedAverage(tc.models, tc.counts)); diff != "" {
				t.Errorf("weightedAverage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShard(t *testing.T) {
	d := &Dataset{Features: []string{"x"}}
	for i := range 7 {
		d.X = append(d.X, []float64{float64(i)})
		d.Y = append(d.Y, float64(i%2))
	}
	var got [][]float64
	for rank := range 3 {
		var xs []float64
		for _, x := range d.Shard(rank, 3).X {
			xs = append(xs, x[0])
		}
		got = append(got, xs)
	}
	want := [][]float64{{0, 3, 6}, {1, 4}, {2, 5}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shards (-want +got):\n%s", diff)
	}
}

func TestLoadDataErrors(t *testing.T) {
	good := "a,b,label\n1,2,0\n3,4,1\n"
	tests := map[string]struct {
		train, test string // "" leaves the file out
		wantErr     string
	}{
		"valid":           {train: good, test: good},
		"missing test":    {train: good, wantErr: "test.csv"},
		"no label column": {train: "a,b\n1,2\n", test: good, wantErr: `then "label"`},
		"bad number":      {train: "a,b,label\n1,x,0\n", test: good, wantErr: "train.csv:2: column b"},
		"bad label":       {train: "a,b,label\n1,2,0\n1,2,yes\n", test: good, wantErr: `train.csv:3: label "yes"`},
		"ragged row":      {train: "a,b,label\n1,2\n", test: good, wantErr: "wrong number of fields"},
		"feature mismatch": {
			train: good, test: "a,label\n1,0\n", wantErr: "has 2 features",
		},
		"no training rows": {train: "a,b,label\n", test: good, wantErr: "no rows"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			for file, body := range map[string]string{"train.csv": tc.train, "test.csv": tc.test} {
				if body != "" {
					if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			train, _, err := loadData(dir)
			if tc.wantErr == "" {
				if err != nil || train.Len() != 2 {
					t.Fatalf("loadData: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("loadData error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
