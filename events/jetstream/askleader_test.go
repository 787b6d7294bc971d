package jetstream

import (
	"context"
	"testing"
	"time"
)

// A leader that does not answer at first (a cluster electing after a restart) is asked
// again until it does; one that never answers is given up on after leaderAskFor, and the
// read then goes by its consumer alone (0).
func TestAskLeaderAsksAgainUntilTheLeaderAnswers(t *testing.T) {
	oldFor, oldEvery := leaderAskFor, leaderAskEvery
	leaderAskFor, leaderAskEvery = 300*time.Millisecond, 10*time.Millisecond
	defer func() { leaderAskFor, leaderAskEvery = oldFor, oldEvery }()
	ctx := context.Background()

	tries := 0
	got := askLeader(ctx, func(ctx context.Context) (uint64, bool) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a try without a deadline")
		}
		tries++
		return 42, tries == 4
	})
	if got != 42 || tries != 4 {
		t.Errorf("answer %d after %d tries, want 42 after 4", got, tries)
	}

	tries = 0
	start := time.Now()
	got = askLeader(ctx, func(context.Context) (uint64, bool) { tries++; return 0, false })
	if waited := time.Since(start); got != 0 || waited < leaderAskFor || tries < 2 {
		t.Errorf("a leader that never answers: %d after %d tries in %s, want 0 after several tries over %s", got, tries, waited, leaderAskFor)
	}

	tries = 0
	if got := askLeader(ctx, func(context.Context) (uint64, bool) { tries++; return 0, true }); got != 0 || tries != 1 {
		t.Errorf("a stream without the subject: %d after %d tries, want 0 after 1", got, tries)
	}
}
