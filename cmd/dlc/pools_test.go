package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPoolFlags(t *testing.T) {
	f := poolFlags{
		selectors:   []string{"spot=node.example/lifecycle=spot", "spot=gpu=a100"},
		tolerations: []string{"spot=node.example/spot=true:NoSchedule", "public=shared:NoExecute"},
		priorities:  []string{"spot=dlc-preemptible"},
	}
	opts, err := f.options()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 2 {
		t.Errorf("%d pool options, want 2 (public, spot)", len(opts))
	}
	for name, bad := range map[string]poolFlags{
		"unknown pool":      {selectors: []string{"cheap=a=b"}},
		"selector no value": {selectors: []string{"spot=a"}},
		"toleration effect": {tolerations: []string{"spot=a=b"}},
	} {
		if _, err := bad.options(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if diff := cmp.Diff([]string{"spot=dlc-preemptible"}, f.priorities); diff != "" {
		t.Error(diff)
	}
}
