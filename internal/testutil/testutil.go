// Package testutil holds small helpers that the tests of several packages share:
// polling for a condition, and telling whether a process still runs.
package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// Condition is what Eventually waits for: a func() bool that returns true, or a
// func() error that returns nil, once the awaited state is there. A func() error says
// why not yet, and Eventually reports its last answer when it gives up.
type Condition interface {
	func() bool | func() error
}

// DefaultInterval is how often Eventually calls its condition when given no interval.
const DefaultInterval = 50 * time.Millisecond

// Eventually calls cond every interval (DefaultInterval when none is given) until it
// holds, and fails the test when timeout passes first, naming what was awaited (and
// cond's last error). cond is called at least once, even with a zero timeout, and may
// itself fail the test (t.Fatal) on an error that waiting will not cure. It is the one
// polling helper of the tests: wait with it rather than with a loop of one's own.
func Eventually[C Condition](t testing.TB, timeout time.Duration, what string, cond C, interval ...time.Duration) {
	t.Helper()
	every := DefaultInterval
	if len(interval) > 0 && interval[0] > 0 {
		every = interval[0]
	}
	var check func() error
	switch c := any(cond).(type) {
	case func() bool:
		check = func() error {
			if c() {
				return nil
			}
			return errNotYet
		}
	case func() error:
		check = c
	}
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			if errors.Is(err, errNotYet) {
				t.Fatalf("%s: not true within %s", what, timeout)
			}
			t.Fatalf("%s: not true within %s: %v", what, timeout, err)
		}
		time.Sleep(min(every, max(time.Until(deadline), time.Millisecond)))
	}
}

var errNotYet = errors.New("not yet")

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
