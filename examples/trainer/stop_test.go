package main

import (
	"io"
	"testing"
)

func TestStopAtStepBoundsTheEpochs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		stop string
		want int
	}{
		{[]string{"--epochs", "12"}, "4", 4},
		{[]string{"--epochs", "3"}, "8", 3},
		{[]string{"--epochs", "12"}, "", 12},
	} {
		cfg, _, err := parseConfig(tc.args, envOf(map[string]string{"DLC_STOP_AT_STEP": tc.stop}), io.Discard)
		if err != nil || cfg.Epochs != tc.want {
			t.Errorf("%v with DLC_STOP_AT_STEP=%q: epochs %d (%v), want %d", tc.args, tc.stop, cfg.Epochs, err, tc.want)
		}
	}
	for _, bad := range []string{"0", "x", "-3"} {
		if _, _, err := parseConfig(nil, envOf(map[string]string{"DLC_STOP_AT_STEP": bad}), io.Discard); err == nil {
			t.Errorf("DLC_STOP_AT_STEP=%q accepted", bad)
		}
	}
}
