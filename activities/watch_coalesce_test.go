package activities

import (
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

func TestDecisiveChange(t *testing.T) {
	rs := func(phases ...schemas.ReplicaPhase) []schemas.ReplicaStatus {
		out := make([]schemas.ReplicaStatus, len(phases))
		for i, p := range phases {
			out[i] = schemas.ReplicaStatus{Name: string(rune('a' + i)), Phase: p}
		}
		return out
	}
	const (
		pe = schemas.ReplicaPending
		ru = schemas.ReplicaRunning
		fa = schemas.ReplicaFailed
		su = schemas.ReplicaSucceeded
		st = schemas.ReplicaStopped
	)
	placed := rs(pe, pe, pe)
	placed[1].Node = "n1"
	code := rs(ru, ru, ru)
	code[0].ExitCode = new(int32(1))
	for _, c := range []struct {
		name     string
		old, cur []schemas.ReplicaStatus
		want     bool
	}{
		{"one of three starts", rs(pe, pe, pe), rs(ru, pe, pe), false},
		{"a replica is placed", rs(pe, pe, pe), placed, false},
		{"the last one starts", rs(ru, ru, pe), rs(ru, ru, ru), true},
		{"all start at once", rs(pe, pe, pe), rs(ru, ru, ru), true},
		{"a pending one fails", rs(pe, pe, pe), rs(fa, pe, pe), true},
		{"a running one succeeds", rs(ru, pe, pe), rs(su, pe, pe), true},
		{"stopped", rs(ru, pe, pe), rs(st, pe, pe), true},
		{"a running one goes back to pending", rs(ru, pe, pe), rs(pe, pe, pe), true},
		{"an exit code appears", rs(ru, ru, ru), code, true},
		{"the list changes", rs(pe, pe), rs(pe, pe, pe), true},
		{"no change", rs(ru, pe, pe), rs(ru, pe, pe), false},
	} {
		if got := decisiveChange(c.old, c.cur); got != c.want {
			t.Errorf("%s: decisiveChange = %v, want %v", c.name, got, c.want)
		}
	}
}

// A failure is held for its echoes only while it may itself be an echo: a replica that
// exited with an error while a peer runs; a replica killed from outside settles it.
func TestFailureUnsettled(t *testing.T) {
	rep := func(p schemas.ReplicaPhase, reason schemas.FailureClass) schemas.ReplicaStatus {
		return schemas.ReplicaStatus{Phase: p, Reason: reason}
	}
	ru := rep(schemas.ReplicaRunning, "")
	for _, c := range []struct {
		name string
		reps []schemas.ReplicaStatus
		want bool
	}{
		{"an error exit while a peer runs", []schemas.ReplicaStatus{rep(schemas.ReplicaFailed, schemas.FailureError), ru}, true},
		{"a SIGKILL while a peer runs", []schemas.ReplicaStatus{rep(schemas.ReplicaFailed, schemas.FailureSignal), ru}, false},
		{"an error exit, then the SIGKILLed peer", []schemas.ReplicaStatus{rep(schemas.ReplicaFailed, schemas.FailureError), rep(schemas.ReplicaFailed, schemas.FailureSignal), ru}, false},
		{"out of memory while a peer runs", []schemas.ReplicaStatus{rep(schemas.ReplicaFailed, schemas.FailureOOMKilled), ru}, false},
		{"an error exit, no peer left", []schemas.ReplicaStatus{rep(schemas.ReplicaFailed, schemas.FailureError), rep(schemas.ReplicaSucceeded, "")}, false},
		{"no failure", []schemas.ReplicaStatus{ru, ru}, false},
	} {
		if got := failureUnsettled(c.reps); got != c.want {
			t.Errorf("%s: failureUnsettled = %v, want %v", c.name, got, c.want)
		}
	}
}
