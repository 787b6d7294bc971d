package schemas_test

import (
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// TestExperimentRangeMustBeFinite: bounds that are each finite but whose difference
// overflows (found by FuzzSearchSpace: TPE then suggested NaN) are refused at submit.
func TestExperimentRangeMustBeFinite(t *testing.T) {
	doc := `apiVersion: opendlc.io/v1alpha1
kind: Experiment
metadata: {name: wide}
spec:
  searchSpace:
    - {name: x, type: float, min: -1e308, max: 1e308}
  objective: {metric: loss, direction: minimize}
  algorithm: {name: tpe}
  maxTrials: 2
  trialTemplate:
    framework: custom
    command: [echo, "${params.x}"]
    roles: {worker: {replicas: 1}}
`
	_, err := schemas.DecodeValid([]byte(doc), schemas.DecodeExperiment)
	if err == nil || !strings.Contains(err.Error(), "max - min must be a finite number") {
		t.Fatalf("got %v, want the range refused", err)
	}
}
