package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/integration/itest"
)

// dlc run with no server starts the embedded stack itself: a successful job's run prints
// its progress, logs and result, and no log line of the stack (no WARN or ERROR, no
// "RecordActivityHeartbeat with error ... context canceled" as the job's activities are
// cancelled at its end); the stack's logs are in dlc-run.log in its state directory.
func TestDlcRunPrintsNoStackLogs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := dlcBinary(t)
	dir := t.TempDir()
	spec := filepath.Join(dir, "job.yaml")
	writeFile(t, spec, itest.JobDoc("quiet", "default", fmt.Sprintf(`
  framework: pytorch
  command: [%q, --epochs, "3"]
  roles: {worker: {replicas: 2}}
  checkpoint: {uri: s3://dlc/quiet/ckpt}
`, env.trainer)))
	state := filepath.Join(dir, "state")
	cmd := exec.CommandContext(ctx, bin, "run", "-f", spec, "--dir", state)
	// Nothing answers at this address, so dlc run starts its own stack (and does not
	// find one another test may have started at the default address).
	cmd.Env = append(os.Environ(), "DLC_SERVER=http://"+freeAddr(t))
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	text := string(out)
	t.Logf("dlc run:\n%s", text)
	if err != nil {
		t.Fatalf("dlc run: %v", err)
	}
	for _, want := range []string{"starting the embedded stack", "embedded stack up", "Running", "Succeeded", "[worker-0] metric  accuracy="} {
		if !strings.Contains(text, want) {
			t.Errorf("dlc run output lacks %q", want)
		}
	}
	logLine := regexp.MustCompile(`level=(WARN|ERROR)|\b(WARN|ERROR)\b|RecordActivityHeartbeat|level=INFO`)
	for line := range strings.SplitSeq(text, "\n") {
		if logLine.MatchString(line) {
			t.Errorf("dlc run printed a log line: %s", line)
		}
	}
	logs, err := os.ReadFile(filepath.Join(state, "dlc-run.log"))
	if err != nil || !strings.Contains(string(logs), "level=INFO") {
		t.Errorf("dlc-run.log: %v, want the stack's info lines:\n%.2000s", err, logs)
	}
	for line := range strings.SplitSeq(string(logs), "\n") {
		if strings.Contains(line, "RecordActivityHeartbeat") || strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			t.Errorf("dlc-run.log holds a warning or an error: %s", line)
		}
	}
}
