package kubestack

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opendlc/opendlc/internal/testutil"
)

// TestCrashedParentLeavesNoComponents starts a cluster from a helper
// process, kills that process with SIGKILL (no Close runs), and checks that
// the kernel ends every component too.
func TestCrashedParentLeavesNoComponents(t *testing.T) {
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), crashHelperEnv+"="+t.TempDir())
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.HasPrefix(line, "error:") {
		helper.Process.Kill()
		helper.Wait()
		t.Fatalf("helper: %q, %v", line, err)
	}
	pids := map[string]int{}
	for f := range strings.FieldsSeq(line) {
		name, pid, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatalf("helper printed %q: %v", f, err)
		}
		pids[name] = n
	}
	t.Cleanup(func() { // a failing test must not leave the components behind either
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if len(pids) != 5 {
		t.Errorf("helper reported %v, want 5 components", pids)
	}
	for name, pid := range pids {
		if !testutil.Alive(pid) {
			t.Fatalf("%s (pid %d) not running before the helper was killed", name, pid)
		}
	}
	helper.Process.Kill()
	helper.Wait()

	testutil.Eventually(t, 10*time.Second, "components gone after their parent was killed", func() error {
		for name, pid := range pids {
			if testutil.Alive(pid) {
				return fmt.Errorf("%s (pid %d) still running", name, pid)
			}
		}
		return nil
	})
}
