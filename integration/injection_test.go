package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// dumpProgram is a Python program that prints its arguments and two variables as one
// JSON line, so the test sees exactly what the replica was given.
const dumpProgram = `import json, os, sys
print("dump:" + json.dumps({"argv": sys.argv[1:], "KEY": os.environ.get("KEY"), "DLC_PARAM_KEY": os.environ.get("DLC_PARAM_KEY")}), flush=True)`

// A value taken from an event (an S3 object key, say) with everything a shell acts on
// — $(...), backticks, ';', quotes, a newline — reaches a real replica literally: as an
// argument, as an environment value, and inside an inline `sh -c` script through an
// environment variable, never as script text. The commands it carries never run.
func TestTriggerParamsReachReplicaLiterally(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	value := fmt.Sprintf("clicks/$(touch %[1]s).csv;touch %[1]s `touch %[1]s` 'q' \"d\" | x\nline2 ${HOME}", marker)

	_, err := env.api.ApplyTrigger(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: Trigger
metadata: {name: literal, workspace: %[1]s}
spec:
  subject: dlc.%[1]s.trigger.literal
  params: {key: "${event.data.key}"}
  action:
    job:
      framework: custom
      command: [sh, -c, 'printf "script:[%%s]\n" "${params.key}"; exec /usr/bin/python3 -c "$0" "$@"', %[2]q, "${params.key}", "k=${params.key}"]
      env: [{name: KEY, value: "${params.key}"}]
      roles: {worker: {replicas: 1}}
`, ws, dumpProgram))
	if err != nil {
		t.Fatalf("apply trigger: %v", err)
	}
	ev, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "upload-1", "source": "/s3", "type": "com.example.upload",
		"datacontenttype": "application/json", "data": map[string]string{"key": value}})
	if _, err := env.events.JetStream().Publish(ctx, "dlc."+ws+".trigger.literal", ev); err != nil {
		t.Fatal(err)
	}
	job := schemas.TriggerRunName("literal", "/s3 upload-1")
	j := waitTerminal(t, ctx, ws, job)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("job %s: %s (%s)", job, j.Status.Phase, j.Status.Message)
	}
	logs := logLines(t, ctx, ws, job)
	t.Logf("replica log:\n%s", logs)

	if !strings.Contains(logs, "script:["+value+"]\n") {
		t.Errorf("the inline script did not print the value literally; log:\n%s", logs)
	}
	var dump struct {
		Argv          []string
		KEY           string
		DLC_PARAM_KEY string //nolint:revive // the variable's name
	}
	_, after, ok := strings.Cut(logs, "dump:")
	if !ok {
		t.Fatalf("no dump line in the log:\n%s", logs)
	}
	if err := json.NewDecoder(strings.NewReader(after)).Decode(&dump); err != nil {
		t.Fatalf("dump line: %v", err)
	}
	if diff := cmp.Diff([]string{value, "k=" + value}, dump.Argv); diff != "" {
		t.Errorf("the replica's arguments (-want +got):\n%s", diff)
	}
	if dump.KEY != value || dump.DLC_PARAM_KEY != value {
		t.Errorf("KEY=%q DLC_PARAM_KEY=%q, want both %q", dump.KEY, dump.DLC_PARAM_KEY, value)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Errorf("%s exists (stat: %v): a command in the value ran", marker, err)
	}
	got, err := env.api.GetJob(ctx, ws, job)
	if err != nil {
		t.Fatal(err)
	}
	if cmd := got.Spec.Spec.Command; len(cmd) < 3 || strings.Contains(cmd[2], "touch") || !strings.Contains(cmd[2], "${DLC_PARAM_KEY}") {
		t.Errorf("the job's script %q: want ${DLC_PARAM_KEY} in place of the value", cmd)
	}
}

// On the real stack, a hostile job filter is refused before it becomes a NATS subject
// (job=> used to answer an empty stream with 200), and a hostile workspace before it
// reaches Temporal.
func TestHostileQueryRefusedOnRealStack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	for _, tc := range []struct{ path, field string }{
		{"/v1/workspaces/" + ws + "/events?" + url.Values{"job": {">"}}.Encode(), "job"},
		{"/v1/workspaces/" + ws + "/events?" + url.Values{"job": {"*"}}.Encode(), "job"},
		{"/v1/workspaces/" + ws + "/events?" + url.Values{"type": {">"}}.Encode(), "type"},
		{"/v1/workspaces/" + url.PathEscape("a.b") + "/jobs", "ws"},
		{"/v1/workspaces/" + url.PathEscape("*") + "/events", "ws"},
		{"/v1/workspaces/" + ws + "/jobs?" + url.Values{"label": {"a"}}.Encode(), "label"},
		{"/v1/workspaces/" + ws + "/jobs/" + strings.Repeat("x", 300), "name"},
	} {
		resp := itest.Do(t, ctx, http.MethodGet, env.e.APIURL+tc.path, env.e.AdminToken, nil)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"field":"`+tc.field+`"`) {
			t.Errorf("GET %s: %d %s, want 400 naming %s", tc.path, resp.StatusCode, body, tc.field)
		}
	}
}
