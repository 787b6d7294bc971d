// Package testutil holds small helpers that the tests of several packages share:
// polling for a condition (or checking that one holds throughout), and telling
// whether a process still runs.
package testutil

import (
	"bytes"
	"context"
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
// polling helper of the tests: wait with it (or with Poll where there is no test to
// fail) rather than with a loop of one's own.
func Eventually[C Condition](t testing.TB, timeout time.Duration, what string, cond C, interval ...time.Duration) {
	t.Helper()
	if err := Poll(context.Background(), timeout, what, cond, interval...); err != nil {
		t.Fatalf("%v", err)
	}
}

// Poll is Eventually for helpers that have no test to fail: it calls cond every
// interval until it holds and returns nil, or returns an error naming what was awaited
// (and cond's last error) once timeout passes or ctx ends. cond is called at least
// once.
func Poll[C Condition](ctx context.Context, timeout time.Duration, what string, cond C, interval ...time.Duration) error {
	check, every := condition(cond, interval)
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) || ctx.Err() != nil {
			if errors.Is(err, errNotYet) {
				return fmt.Errorf("%s: not true within %s", what, timeout)
			}
			return fmt.Errorf("%s: not true within %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(every, max(time.Until(deadline), time.Millisecond))):
		}
	}
}

// Consistently calls cond every interval (DefaultInterval when none is given) for d
// and fails the test the first time it does not hold, naming what should have held
// (and cond's error). It is Eventually's opposite: a state that must stay, such as an
// object that nothing may delete.
func Consistently[C Condition](t testing.TB, d time.Duration, what string, cond C, interval ...time.Duration) {
	t.Helper()
	check, every := condition(cond, interval)
	deadline := time.Now().Add(d)
	for {
		if err := check(); err != nil {
			if errors.Is(err, errNotYet) {
				t.Fatalf("%s: stopped being true within %s", what, d)
			}
			t.Fatalf("%s: stopped being true within %s: %v", what, d, err)
		}
		if !time.Now().Before(deadline) {
			return
		}
		time.Sleep(min(every, max(time.Until(deadline), time.Millisecond)))
	}
}

// condition returns cond as a func() error and the interval to call it at.
func condition[C Condition](cond C, interval []time.Duration) (func() error, time.Duration) {
	every := DefaultInterval
	if len(interval) > 0 && interval[0] > 0 {
		every = interval[0]
	}
	switch c := any(cond).(type) {
	case func() bool:
		return func() error {
			if c() {
				return nil
			}
			return errNotYet
		}, every
	case func() error:
		return c, every
	}
	panic("unreachable: Condition has two types")
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
