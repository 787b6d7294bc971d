package schemas

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hostileValue has every character a shell would act on.
const hostileValue = "a;b $(touch /tmp/pwned) `id` 'q' \"d\" ${HOME} \\ | & > x\nline2"

func TestShellScriptArg(t *testing.T) {
	for _, tt := range []struct {
		argv []string
		want int
	}{
		{[]string{"sh", "-c", "echo"}, 2},
		{[]string{"/bin/bash", "-euo", "pipefail", "-c", "echo", "arg0"}, 4},
		{[]string{"bash", "-lc", "echo"}, 2},
		{[]string{"bash", "-c", "-e", "echo"}, 3},
		{[]string{"/usr/bin/env", "FOO=1", "bash", "-c", "echo"}, 4},
		{[]string{"busybox", "sh", "-c", "echo"}, 3},
		{[]string{"sh", "script.sh", "-c"}, -1},
		{[]string{"sh", "-e"}, -1},
		{[]string{"python3", "-c", "print(1)"}, -1},
		{[]string{"train", "--lr", "0.1"}, -1},
		{nil, -1},
	} {
		if got := ShellScriptArg(tt.argv); got != tt.want {
			t.Errorf("ShellScriptArg(%q) = %d, want %d", tt.argv, got, tt.want)
		}
	}
}

// A value reaches an argv element and an env value byte for byte; in an inline shell
// script the reference becomes an environment variable that holds the value, so the
// shell never parses it; a role that runs its own script gets the same variable.
func TestSubstituteJobKeepsValuesOutOfShells(t *testing.T) {
	spec := TrainingJobSpec{
		Command: []string{"sh", "-c", `echo "lr=${params.lr}" ${params.key}; echo ${HOME}`, "x", "${params.key}"},
		Env:     []EnvVar{{Name: "KEY", Value: "k=${params.key}"}, {Name: "DLC_PARAM_KEY", Value: "user's own"}},
		Roles: map[string]RoleSpec{
			"worker": {Replicas: 1},
			"eval":   {Replicas: 1, Command: []string{"evaluate", "--key=${params.key}"}},
			"shell":  {Replicas: 1, Command: []string{"bash"}, Args: []string{"-c", "run ${params.lr}"}},
		},
		Checkpoint: &CheckpointSpec{URI: "s3://b/ck/${params.lr}"},
	}
	values := map[string]string{"lr": "0.1", "key": hostileValue}
	errs := SubstituteJob(&spec, NewPath("spec"), func(r TemplateRef) (string, error) { return values[r.Name], nil })
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := []string{"sh", "-c", `echo "lr=${DLC_PARAM_LR}" ${DLC_PARAM_KEY_2}; echo ${HOME}`, "x", hostileValue}
	if diff := cmp.Diff(want, spec.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	wantEnv := []EnvVar{{Name: "KEY", Value: "k=" + hostileValue}, {Name: "DLC_PARAM_KEY", Value: "user's own"},
		{Name: "DLC_PARAM_LR", Value: "0.1"}, {Name: "DLC_PARAM_KEY_2", Value: hostileValue}}
	if diff := cmp.Diff(wantEnv, spec.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"evaluate", "--key=" + hostileValue}, spec.Roles["eval"].Command); diff != "" {
		t.Errorf("eval command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"-c", "run ${DLC_PARAM_LR}"}, spec.Roles["shell"].Args); diff != "" {
		t.Errorf("shell role's args (-want +got):\n%s", diff)
	}
	if spec.Checkpoint.URI != "s3://b/ck/0.1" {
		t.Errorf("checkpoint uri %q", spec.Checkpoint.URI)
	}
}

// NUL bytes and over-long values are refused, naming the reference and the field.
func TestSubstituteJobRefusesNULAndLongValues(t *testing.T) {
	for value, want := range map[string]string{
		"a\x00b": "spec.args[0]: the value of ${params.v} holds a NUL byte",
		strings.Repeat("x", MaxTemplateValueLength+1): "spec.args[0]: the value of ${params.v} is 4097 bytes long; at most 4096",
	} {
		spec := TrainingJobSpec{Command: []string{"train"}, Args: []string{"--v=${params.v}"}}
		errs := SubstituteJob(&spec, NewPath("spec"), func(TemplateRef) (string, error) { return value, nil })
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("errors %v, want one containing %q", errs, want)
		}
	}
}

// A trial's parameters follow the same rules: the experiment's template runs them
// through SubstituteJob.
func TestTrialJobUsesEnvInShellScripts(t *testing.T) {
	e := Experiment{Metadata: ObjectMeta{Name: "exp", Workspace: "w"}}
	e.Spec.TrialTemplate = TrainingJobSpec{Command: []string{"sh", "-c", "train --opt ${params.opt}", "${params.opt}"},
		Roles: map[string]RoleSpec{"worker": {Replicas: 1}}}
	job, err := e.TrialJob("exp-t1", 1, map[string]string{"opt": "adam; rm -rf /"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sh", "-c", "train --opt ${DLC_PARAM_OPT}", "adam; rm -rf /"}, job.Spec.Command); diff != "" {
		t.Errorf("command (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]EnvVar{{Name: "DLC_PARAM_OPT", Value: "adam; rm -rf /"}}, job.Spec.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestResolveParamsRefusesNUL(t *testing.T) {
	s := TriggerSpec{Params: map[string]string{"key": "${event.key}"}}
	_, err := s.ResolveParams(map[string]any{"key": "a\x00b"})
	if err == nil || !strings.Contains(err.Error(), "params.key") || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("ResolveParams = %v, want an error naming params.key and the NUL byte", err)
	}
}
