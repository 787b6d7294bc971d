package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// The CLI end to end: `dlc up` in the foreground prints its banner, then `dlc run`
// against it streams progress and exits 0, and describe, logs, list, get -o yaml (whose
// output re-submits as is), stop and delete all work through the API.
func TestCLIAgainstDlcUp(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// Its jobs run in the sandbox where the host gives one (as root): the working
	// directory, with the trainer, is open to the workspaces' users. --trust-local-jobs:
	// where it does not, the viewer token of cli-team below is still given.
	dir := sandboxWorkDir(t)
	bin := dlcBinary(t)
	addr := freeAddr(t)
	server := "http://" + addr

	up := itest.StartDlcUp(t, ctx, bin, "--dir", filepath.Join(dir, "state"), "--addr", addr, "--ui=false", "--workdir", dir, "--trust-local-jobs")
	text := up.Banner
	if local.SandboxAvailable() == nil && !strings.Contains(text, "Local jobs   sandboxed") {
		t.Errorf("banner does not say local jobs are sandboxed:\n%s", text)
	}
	tokenFile := filepath.Join(dir, "state", "admin-token")
	for _, want := range []string{"API          " + server, "Temporal     127.0.0.1:", "NATS         nats://127.0.0.1:", "S3           http://127.0.0.1:",
		"Admin token  in " + tokenFile} {
		if !strings.Contains(text, want) {
			t.Errorf("banner lacks %q:\n%s", want, text)
		}
	}
	// dlc up wrote the admin token into its state directory; the commands use it.
	adminToken, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text, strings.TrimSpace(string(adminToken))) || strings.Contains(up.Stderr(), strings.TrimSpace(string(adminToken))) {
		t.Errorf("dlc up printed the admin token")
	}
	token := strings.TrimSpace(string(adminToken))
	tokenEnv := "DLC_TOKEN=" + token
	dlc := itest.CLI{Bin: bin, Server: server, Token: token, Dir: dir}.Runner(ctx)
	spec := filepath.Join(dir, "job.yaml")
	writeFile(t, spec, itest.JobDoc("cli", "cli", `
  framework: pytorch
  command: [./trainer, --epochs, "3"]
  roles: {worker: {replicas: 2}}
  checkpoint: {uri: s3://dlc/workspaces/cli/ckpt}
`))

	out, err := dlc("run", "-f", spec)
	if err != nil {
		t.Fatalf("dlc run: %v\n%s", err, out)
	}
	for _, want := range []string{"Pending", "Launching", "Running", "Succeeded", "[worker-0] metric  accuracy=", "last checkpoint: s3://dlc/workspaces/cli/ckpt/"} {
		if !strings.Contains(out, want) {
			t.Errorf("dlc run output lacks %q:\n%s", want, out)
		}
	}

	out, err = dlc("-w", "cli", "job", "describe", "cli")
	if err != nil || !strings.Contains(out, "Phase:       Succeeded") || !strings.Contains(out, "cli-worker-1-a0") {
		t.Errorf("describe: %v\n%s", err, out)
	}
	out, err = dlc("-w", "cli", "job", "logs", "cli", "--replica", "worker-1")
	if err != nil || !strings.Contains(out, "[worker-1]") || strings.Contains(out, "[worker-0]") {
		t.Errorf("logs --replica worker-1: %v\n%s", err, out)
	}

	// The exported spec re-submits as is (after the original is deleted).
	exported, err := dlc("-w", "cli", "job", "get", "cli", "-o", "yaml")
	if err != nil {
		t.Fatalf("get -o yaml: %v\n%s", err, exported)
	}
	if out, err := dlc("-w", "cli", "job", "delete", "cli"); err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	writeFile(t, spec, exported)
	if out, err := dlc("job", "submit", "-f", spec); err != nil {
		t.Fatalf("re-submit exported spec: %v\n%s", err, out)
	}

	// A long job: listed while running, then stopped.
	writeFile(t, spec, itest.JobDoc("long", "cli", `
  framework: custom
  command: [sh, -c, 'for i in 1 2 3; do echo tick $i; done; exec sleep 600']
  roles: {worker: {replicas: 1}}
`))
	if out, err := dlc("job", "apply", "-f", spec); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	testutil.Eventually(t, itest.Left(ctx), "the long job listed as Running", func() error {
		out, _ = dlc("-w", "cli", "job", "list")
		if !strings.Contains(out, "long") || !strings.Contains(out, "Running") {
			return fmt.Errorf("dlc list:\n%s", out)
		}
		return nil
	}, 200*time.Millisecond)
	// dlc job logs -f follows the live job and ends when the job does.
	follow := exec.CommandContext(ctx, bin, "--server", server, "-w", "cli", "job", "logs", "long", "-f")
	follow.Env = append(os.Environ(), tokenEnv)
	var followed bytes.Buffer
	follow.Stdout = &followed
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := dlc("-w", "cli", "job", "stop", "long"); err != nil || !strings.Contains(out, "Stopped") {
		t.Errorf("stop: %v\n%s", err, out)
	}
	if err := follow.Wait(); err != nil {
		t.Errorf("dlc job logs -f: %v", err)
	}
	if want := "[worker-0] tick 1\n[worker-0] tick 2\n[worker-0] tick 3\n"; followed.String() != want {
		t.Errorf("dlc job logs -f printed %q, want %q", followed.String(), want)
	}

	// Access: the admin creates a workspace and a viewer token for it; the viewer reads
	// its workspace, cannot see another or submit; once revoked, its token is refused.
	if out, err := dlc("whoami"); err != nil || !strings.Contains(out, "role:       admin") || !strings.Contains(out, "workspace:  *") {
		t.Errorf("whoami: %v\n%s", err, out)
	}
	if out, err := dlc("workspace", "create", "cli-team", "--namespace", "team-ns"); err != nil {
		t.Fatalf("workspace create: %v\n%s", err, out)
	}
	if out, err := dlc("workspace", "list"); err != nil || !regexp.MustCompile(`cli-team\s+team-ns`).MatchString(out) {
		t.Errorf("workspace list: %v\n%s", err, out)
	}
	create := exec.CommandContext(ctx, bin, "--server", server, "-w", "cli-team", "token", "create", "cli-viewer", "--role", "viewer", "--ttl", "1h")
	create.Env = append(os.Environ(), tokenEnv)
	var created, createErr bytes.Buffer
	create.Stdout, create.Stderr = &created, &createErr
	if err := create.Run(); err != nil {
		t.Fatalf("token create: %v\n%s", err, createErr.String())
	}
	viewer := strings.TrimSpace(created.String())
	if !strings.HasPrefix(viewer, "dlc_") || !strings.Contains(createErr.String(), "shown only now") {
		t.Fatalf("token create printed %q, %q", viewer, createErr.String())
	}
	if out, err := dlc("--token", viewer, "whoami"); err != nil || !strings.Contains(out, "cli-viewer") || !strings.Contains(out, "role:       viewer") {
		t.Errorf("whoami as the viewer: %v\n%s", err, out)
	}
	if out, err := dlc("--token", viewer, "-w", "cli-team", "job", "list"); err != nil {
		t.Errorf("the viewer lists its workspace: %v\n%s", err, out)
	}
	if out, err := dlc("--token", viewer, "-w", "cli", "job", "describe", "cli"); err == nil || !strings.Contains(out, "not found") {
		t.Errorf("the viewer reads another workspace's job: %v\n%s", err, out)
	}
	if out, err := dlc("--token", viewer, "job", "submit", "-f", spec); err == nil || !strings.Contains(out, "metadata.workspace") {
		t.Errorf("the viewer submits into another workspace: %v\n%s", err, out)
	}
	if out, err := dlc("token", "list"); err != nil || !strings.Contains(out, "cli-viewer") || strings.Contains(out, viewer) {
		t.Errorf("token list: %v\n%s", err, out)
	}
	if out, err := dlc("token", "revoke", "cli-viewer"); err != nil {
		t.Errorf("token revoke: %v\n%s", err, out)
	}
	if out, err := dlc("--token", viewer, "whoami"); err == nil || !strings.Contains(out, "invalid token") {
		t.Errorf("a revoked token: %v\n%s", err, out)
	}

	// A spec with mistakes: dlc run prints them and exits 1 without submitting.
	mistakes, err := filepath.Abs("../schemas/testdata/five-mistakes.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out, err = dlc("run", "-f", mistakes)
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 1 || !strings.Contains(out, "5 error(s)") {
		t.Errorf("run of an invalid spec: %v\n%s", err, out)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
