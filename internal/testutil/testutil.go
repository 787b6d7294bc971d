// Package testutil holds small helpers that the tests of several packages share:
// polling for a condition, and telling whether a process still runs.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

// Eventually polls check every 50ms until it returns nil, and fails the test with
// check's last error when timeout passes first; what says what was awaited.
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %s: %v", what, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Alive reports whether pid is a live process, from /proc/<pid>/stat (so only on
// Linux; elsewhere it reports false). A zombie that nobody has reaped yet counts as
// gone: nothing of it runs.
func Alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	f := bytes.Fields(stat[i+1:])
	return len(f) > 0 && string(f[0]) != "Z" && string(f[0]) != "X"
}
