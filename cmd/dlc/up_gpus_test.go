package main

import (
	"strings"
	"testing"
)

// --gpus takes the number of GPUs to simulate; a negative one is refused before
// anything starts, naming the flag.
func TestUpRefusesNegativeGPUs(t *testing.T) {
	for _, cmd := range []string{"up", "worker"} {
		c := newRoot()
		c.SetArgs([]string{cmd, "--gpus", "-2", "--dir", t.TempDir()})
		if cmd == "worker" {
			c.SetArgs([]string{cmd, "--gpus", "-2", "--state-dir", t.TempDir()})
		}
		err := c.Execute()
		if err == nil || !strings.Contains(err.Error(), "--gpus: -2 is negative") {
			t.Errorf("dlc %s --gpus -2: error %v", cmd, err)
		}
	}
	if f := newUpCmd().Flags().Lookup("gpus"); f == nil || f.DefValue != "0" {
		t.Errorf("dlc up has no --gpus flag defaulting to 0: %+v", f)
	}
}
