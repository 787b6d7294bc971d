package hpo

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ptr(v float64) *float64 { return new(v) }

func TestValidate(t *testing.T) {
	ok := Param{Name: "ok", Type: Float, Min: 0, Max: 1}
	tests := map[string]struct {
		space Space
		// want is a fragment of the error, "" for a valid space; every error must also
		// name the parameter (wantParam) and wrap ErrInvalidSpace.
		want      string
		wantParam string
	}{
		"valid mix": {space: Space{
			{Name: "lr", Type: Float, Min: 1e-5, Max: 1, Log: true},
			{Name: "layers", Type: Int, Min: 1, Max: 8},
			{Name: "batch", Type: Int, Min: 16, Max: 256, Step: 16},
			{Name: "dropout", Type: Float, Min: 0, Max: 0.5, Step: 0.1},
			{Name: "opt", Type: Categorical, Values: []string{"adam", "sgd"}},
			{Name: "one", Type: Categorical, Values: []string{"only"}},
		}},
		"empty":                 {space: Space{}, want: "no parameters"},
		"no name":               {space: Space{{Type: Float, Min: 0, Max: 1}}, want: "parameter 0 has no name"},
		"duplicate name":        {space: Space{ok, ok}, want: "defined twice", wantParam: "ok"},
		"unknown type":          {space: Space{{Name: "x", Type: "complex", Min: 0, Max: 1}}, want: "unknown type", wantParam: "x"},
		"min equals max":        {space: Space{{Name: "x", Type: Float, Min: 1, Max: 1}}, want: "must be < max", wantParam: "x"},
		"min above max":         {space: Space{{Name: "x", Type: Int, Min: 5, Max: 1}}, want: "must be < max", wantParam: "x"},
		"infinite bound":        {space: Space{{Name: "x", Type: Float, Min: 0, Max: math.Inf(1)}}, want: "finite", wantParam: "x"},
		"log with zero min":     {space: Space{{Name: "lr", Type: Float, Min: 0, Max: 1, Log: true}}, want: "log scale needs min > 0", wantParam: "lr"},
		"log with negative min": {space: Space{{Name: "lr", Type: Int, Min: -1, Max: 10, Log: true}}, want: "log scale needs min > 0", wantParam: "lr"},
		"negative step":         {space: Space{{Name: "x", Type: Float, Min: 0, Max: 1, Step: -0.1}}, want: "must be > 0", wantParam: "x"},
		"step above range":      {space: Space{{Name: "x", Type: Float, Min: 0, Max: 1, Step: 2}}, want: "must be <= max-min", wantParam: "x"},
		"fractional int step":   {space: Space{{Name: "n", Type: Int, Min: 0, Max: 10, Step: 0.5}}, want: "whole number", wantParam: "n"},
		"fractional int bound":  {space: Space{{Name: "n", Type: Int, Min: 0.5, Max: 10}}, want: "whole numbers", wantParam: "n"},
		"no values":             {space: Space{{Name: "opt", Type: Categorical}}, want: "at least one value", wantParam: "opt"},
		"repeated value":        {space: Space{{Name: "opt", Type: Categorical, Values: []string{"a", "b", "a"}}}, want: `"a" is listed twice`, wantParam: "opt"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Validate(tc.space)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error containing %q", tc.want)
			}
			if !errors.Is(err, ErrInvalidSpace) {
				t.Errorf("Validate() = %v, does not wrap ErrInvalidSpace", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want it to contain %q", err, tc.want)
			}
			if tc.wantParam != "" && !strings.Contains(err.Error(), `"`+tc.wantParam+`"`) {
				t.Errorf("Validate() = %v, want it to name parameter %q", err, tc.wantParam)
			}
		})
	}
}

func TestFormat(t *testing.T) {
	space := Space{
		{Name: "lr", Type: Float, Min: 1e-6, Max: 1, Log: true},
		{Name: "dropout", Type: Float, Min: 0, Max: 1, Step: 0.1},
		{Name: "layers", Type: Int, Min: 1, Max: 1000},
		{Name: "opt", Type: Categorical, Values: []string{"adam", "sgd", "lamb"}},
		{Name: "missing", Type: Int, Min: 0, Max: 1},
	}
	tests := map[string]struct {
		params map[string]float64
		want   map[string]string
	}{
		"every kind": {
			params: map[string]float64{"lr": 0.00012, "dropout": 0.3, "layers": 120, "opt": 2},
			want:   map[string]string{"lr": "0.00012", "dropout": "0.3", "layers": "120", "opt": "lamb"},
		},
		"small and large floats use g": {
			params: map[string]float64{"lr": 1e-6, "layers": 1000},
			want:   map[string]string{"lr": "1e-06", "layers": "1000"},
		},
		"int rounds a float that is off by noise": {
			params: map[string]float64{"layers": 6.999999999},
			want:   map[string]string{"layers": "7"},
		},
		"categorical out of range is left out": {
			params: map[string]float64{"opt": 3},
			want:   map[string]string{},
		},
		"names not in the space are ignored": {
			params: map[string]float64{"other": 1, "dropout": 0.5},
			want:   map[string]string{"dropout": "0.5"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Format(space, tc.params)); diff != "" {
				t.Errorf("Format() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBest(t *testing.T) {
	trials := []Trial{
		{ID: 0, State: TrialCompleted, Value: ptr(3)},
		{ID: 1, State: TrialPruned, Value: ptr(-100)},
		{ID: 2, State: TrialCompleted, Value: ptr(1)},
		{ID: 3, State: TrialFailed, Value: ptr(-50)},
		{ID: 4, State: TrialCompleted, Value: ptr(5)},
		{ID: 5, State: TrialRunning},
		{ID: 6, State: TrialCompleted, Value: ptr(1)},
		{ID: 7, State: TrialCompleted},
	}
	tests := map[string]struct {
		h      History
		wantID int
		wantOK bool
	}{
		"minimise, tie goes to the lowest id": {h: History{Trials: trials}, wantID: 2, wantOK: true},
		"explicit minimise":                   {h: History{Direction: Minimize, Trials: trials}, wantID: 2, wantOK: true},
		"maximise":                            {h: History{Direction: Maximize, Trials: trials}, wantID: 4, wantOK: true},
		"nothing completed":                   {h: History{Trials: trials[1:2]}, wantOK: false},
		"empty":                               {h: History{}, wantOK: false},
		"trial order does not matter": {
			h:      History{Trials: []Trial{trials[6], trials[4], trials[2], trials[0]}},
			wantID: 2, wantOK: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := Best(tc.h)
			if ok != tc.wantOK || (ok && got.ID != tc.wantID) {
				t.Errorf("Best() = trial %d, %v; want trial %d, %v", got.ID, ok, tc.wantID, tc.wantOK)
			}
		})
	}
}
