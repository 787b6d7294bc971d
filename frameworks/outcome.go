package frameworks

import (
	"cmp"
	"slices"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// Outcome applies framework f's success rule to a snapshot of the replicas of one
// attempt. phase is "" while the rule has not decided, else JobSucceeded or JobFailed.
// decidedBy is the name of the replica whose state decided: the deciding replica (TF's
// chief, MPI's and Slurm's launcher, Ray's head), the replica that failed first, or, for
// rules that wait for every replica, the one that finished last. It is "" when phase is.
//
// A replica that is Stopped counts as failed: the job did not stop it, so something
// else did. Replicas still running when the rule decides are the caller's to stop.
//
// A framework without registered rules gets the all-replicas rule, so a history written
// before a framework was removed still replays to the same result.
func Outcome(f schemas.Framework, replicas []schemas.ReplicaStatus) (phase schemas.JobPhase, decidedBy string) {
	fw, err := Get(f)
	if err != nil {
		return allSucceed(replicas)
	}
	return fw.Outcome(replicas)
}

// allSucceed is the rule of frameworks whose replicas are peers: any failed replica fails
// the job, and it succeeds when every replica has.
func allSucceed(reps []schemas.ReplicaStatus) (schemas.JobPhase, string) {
	if len(reps) == 0 {
		return "", ""
	}
	if f := firstFailure(reps); f != nil {
		return schemas.JobFailed, f.Name
	}
	var last *schemas.ReplicaStatus
	for i := range reps {
		r := &reps[i]
		if r.Phase != schemas.ReplicaSucceeded {
			return "", ""
		}
		if last == nil || finishedBefore(last, r) {
			last = r
		}
	}
	return schemas.JobSucceeded, last.Name
}

// leaderDecides is the rule of frameworks with one deciding replica: the job succeeds
// when it does. The job fails when it fails or, with failFast, when any replica fails
// (the leader would otherwise wait for a peer that is gone). Without a deciding replica,
// the all-replicas rule applies.
func leaderDecides(reps []schemas.ReplicaStatus, role string, index int, failFast bool) (schemas.JobPhase, string) {
	leader := find(reps, role, index)
	if leader == nil {
		return allSucceed(reps)
	}
	if leader.Phase == schemas.ReplicaSucceeded {
		return schemas.JobSucceeded, leader.Name
	}
	if failFast {
		if f := firstFailure(reps); f != nil {
			return schemas.JobFailed, f.Name
		}
	}
	if failed(leader) {
		return schemas.JobFailed, leader.Name
	}
	return "", ""
}

// find returns the replica role/index, or nil.
func find(reps []schemas.ReplicaStatus, role string, index int) *schemas.ReplicaStatus {
	for i := range reps {
		if reps[i].Role == role && reps[i].Index == index {
			return &reps[i]
		}
	}
	return nil
}

func hasRole(reps []schemas.ReplicaStatus, role string) bool {
	return slices.ContainsFunc(reps, func(r schemas.ReplicaStatus) bool { return r.Role == role })
}

func failed(r *schemas.ReplicaStatus) bool {
	return r.Phase == schemas.ReplicaFailed || r.Phase == schemas.ReplicaStopped
}

// peerFailureWindow is how close to the first failure a replica's failure counts as
// the same event (see firstFailure).
const peerFailureWindow = 2 * time.Second

// firstFailure returns the failed replica that is the likeliest cause of the others, or
// nil: the one that finished first, except that a replica ended from outside (killed by
// a signal, out of memory, evicted, preempted, its node lost, its pod deleted) within
// peerFailureWindow of it is preferred to one that merely exited with an error. When a
// replica is killed, its peers see their connections reset at once and exit with an
// error themselves, often before the killed replica's own end is recorded (its
// supervisor or kubelet reports it a moment later on a busy node): the first recorded
// failure is then a symptom. The choice does not depend on the order of reps.
func firstFailure(reps []schemas.ReplicaStatus) *schemas.ReplicaStatus {
	var first, external *schemas.ReplicaStatus
	for i := range reps {
		r := &reps[i]
		if failed(r) && (first == nil || finishedBefore(r, first)) {
			first = r
		}
	}
	if first == nil || first.FinishTime == nil || first.Reason.EndedFromOutside() {
		return first
	}
	for i := range reps {
		r := &reps[i]
		if r.Phase == schemas.ReplicaFailed && r.Reason.EndedFromOutside() && r.FinishTime != nil &&
			r.FinishTime.Sub(*first.FinishTime) <= peerFailureWindow && (external == nil || finishedBefore(r, external)) {
			external = r
		}
	}
	if external != nil {
		return external
	}
	return first
}

// finishedBefore orders replicas by finish time (unknown last), then role and index, so
// that every order of a snapshot picks the same replica.
func finishedBefore(a, b *schemas.ReplicaStatus) bool {
	switch {
	case a.FinishTime != nil && b.FinishTime == nil:
		return true
	case a.FinishTime == nil && b.FinishTime != nil:
		return false
	case a.FinishTime != nil && !a.FinishTime.Equal(*b.FinishTime):
		return a.FinishTime.Before(*b.FinishTime)
	}
	if c := cmp.Compare(a.Role, b.Role); c != 0 {
		return c < 0
	}
	return a.Index < b.Index
}
