package devstack

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/internal/testutil"
)

// TestCrashedParentLeavesNoServers starts the servers from a helper process,
// kills that process with SIGKILL (no Close runs), and checks that the
// kernel ends the servers too.
func TestCrashedParentLeavesNoServers(t *testing.T) {
	if dir := os.Getenv("DEVSTACK_TEST_HELPER_DIR"); dir != "" {
		ctx := t.Context()
		s3, err := StartS3(ctx, S3Options{Dir: dir + "/s3"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		tp, err := StartTemporal(ctx, TemporalOptions{Dir: dir + "/temporal"})
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(s3.proc.Pid(), tp.proc.Pid())
		select {} // until killed
	}
	t.Parallel()

	helper := exec.Command(os.Args[0], "-test.run=^TestCrashedParentLeavesNoServers$")
	helper.Env = append(os.Environ(), "DEVSTACK_TEST_HELPER_DIR="+t.TempDir())
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		t.Fatalf("helper: %v", err)
	}
	var s3Pid, temporalPid int
	if _, err := fmt.Sscan(line, &s3Pid, &temporalPid); err != nil {
		helper.Process.Kill()
		t.Fatalf("helper said %q", line)
	}
	t.Cleanup(func() { // a failing test must not leave the servers behind either
		syscall.Kill(s3Pid, syscall.SIGKILL)
		syscall.Kill(temporalPid, syscall.SIGKILL)
	})
	if !testutil.Alive(s3Pid) || !testutil.Alive(temporalPid) {
		t.Fatal("servers not running before the helper was killed")
	}
	helper.Process.Kill()
	helper.Wait()

	testutil.Eventually(t, 10*time.Second, "servers gone after their parent was killed", func() error {
		for name, pid := range map[string]int{"versitygw": s3Pid, "temporal": temporalPid} {
			if testutil.Alive(pid) {
				return fmt.Errorf("%s (pid %d) still running", name, pid)
			}
		}
		return nil
	})
}
