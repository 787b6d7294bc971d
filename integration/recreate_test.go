package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
)

// dlc job get NAME -o command prints a script that recreates the job: run with sh
// against the stack (the name changed, as a user would), its dlc command submits a job
// whose spec is the original's; the Go program in it, run with go run, does the same.
func TestGeneratedCommandRecreatesTheJob(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	bin := dlcBinary(t)
	submit(t, ctx, itest.JobDoc("original", ws, strings.ReplaceAll(`
  framework: custom
  command: [sh, -c, 'echo "attempt $DLC_ATTEMPT, BQecho quotedBQ"']
  args: [--lr, "0.1"]
  env: [{name: GREETING, value: "hello $USER"}]
  roles: {worker: {replicas: 2, resources: {cpu: 500m, memory: 64Mi}}}
  faultTolerance: {maxRestarts: 1}
  timeout: 10m
  queueTimeout: 5m
`, "BQ", "`")))
	orig := waitTerminal(t, ctx, ws, "original")
	if orig.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("original %s: %s", orig.Status.Phase, orig.Status.Message)
	}
	environ := append(os.Environ(), "DLC_SERVER="+env.e.APIURL, "DLC_TOKEN="+env.e.AdminToken,
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))

	cmd := exec.CommandContext(ctx, bin, "-w", ws, "job", "get", "original", "-o", "command")
	cmd.Env = environ
	script, err := cmd.Output()
	if err != nil {
		t.Fatalf("get -o command: %v", err)
	}
	t.Logf("dlc get job original -o command:\n%s", script)
	if filepath.Base(bin) != "dlc" {
		t.Fatalf("the dlc binary is %s: the script calls dlc", bin)
	}
	withName := func(name string) string {
		s := strings.ReplaceAll(string(script), "name: original\n", "name: "+name+"\n")
		if strings.Count(s, "name: "+name+"\n") != 2 {
			t.Fatalf("the script does not name the job once in its dlc command and once in its program:\n%s", script)
		}
		return s
	}

	run := exec.CommandContext(ctx, "sh")
	run.Stdin = strings.NewReader(withName("by-dlc"))
	run.Env = environ
	if out, err := run.CombinedOutput(); err != nil || !strings.Contains(string(out), "by-dlc submitted") {
		t.Fatalf("sh: %v\n%s", err, out)
	}
	sameSpec(t, orig, waitTerminal(t, ctx, ws, "by-dlc"))

	// The Go program: cut out of the script and run inside this module.
	s := withName("by-sdk")
	_, prog, _ := strings.Cut(s, ": <<'OPENDLC_GO'\n")
	prog, _, _ = strings.Cut(prog, "\nOPENDLC_GO\n")
	dir, err := os.MkdirTemp("..", ".recreate-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	writeFile(t, filepath.Join(dir, "main.go"), prog+"\n")
	gorun := exec.CommandContext(ctx, "go", "run", filepath.Join(dir, "main.go"))
	gorun.Env = environ
	if out, err := gorun.CombinedOutput(); err != nil || !strings.Contains(string(out), "by-sdk submitted") {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	sameSpec(t, orig, waitTerminal(t, ctx, ws, "by-sdk"))

	// The SDK gives the same script.
	sdk, err := env.api.JobCommand(ctx, ws, "original")
	if err != nil || !strings.Contains(string(script), sdk.DLC) || !strings.Contains(string(script), sdk.Go) {
		t.Errorf("client.JobCommand: %v\n%+v", err, sdk)
	}
}

// sameSpec checks that the copy's spec is the original's, but for its name.
func sameSpec(t *testing.T, orig, copied *api.Job) {
	t.Helper()
	if copied.Status.Phase != schemas.JobSucceeded {
		t.Errorf("%s %s: %s", copied.Spec.Metadata.Name, copied.Status.Phase, copied.Status.Message)
	}
	want, got := orig.Spec, copied.Spec
	got.Metadata.Name = want.Metadata.Name
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s's spec differs from the original's (-original +copy):\n%s", copied.Spec.Metadata.Name, diff)
	}
}
