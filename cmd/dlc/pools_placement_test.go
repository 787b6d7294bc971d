package main

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
)

func TestPoolPlacementFlags(t *testing.T) {
	f := poolFlags{
		PlacementTimeout: []string{"quota=15m", "spot=none"},
		Autoscaled:       []string{"public"},
	}
	got, err := f.configs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[schemas.Pool]*kube.PoolConfig{
		schemas.PoolQuota:  {PlacementTimeout: 15 * time.Minute},
		schemas.PoolSpot:   {PlacementTimeout: -1},
		schemas.PoolPublic: {Autoscaled: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]poolFlags{
		"no duration":        {PlacementTimeout: []string{"quota=soon"}},
		"zero":               {PlacementTimeout: []string{"quota=0s"}},
		"unknown pool":       {PlacementTimeout: []string{"cheap=1m"}},
		"autoscaled nowhere": {Autoscaled: []string{"cheap"}},
	} {
		if _, err := bad.configs(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
