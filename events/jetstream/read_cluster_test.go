package jetstream_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/internal/testutil"
)

// A read right after a server of a three-server cluster restarted still delivers every
// message the stream's leader has. NATS places a read's consumer (ordered, one replica)
// on any peer of an R3 stream, also on the restarted server while it catches up; the
// read used to end on that consumer's "nothing pending" and miss what the server had not
// received yet (a job's logs archived right after a server restart lost 30,000 of 40,000
// lines in integration/topology). Each round stops a server, publishes while it is down,
// restarts it and reads at once from several readers; the test goes on until some read's
// consumer was placed on a lagging replica (the fault: it saw fewer messages pending
// than the stream holds) and checks that every read delivered them all.
func TestReadAfterARestartDeliversWhatTheLeaderHas(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cluster, err := devstack.StartNATSCluster(ctx, devstack.NATSClusterOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	c, err := jetstream.Connect(cluster.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const stream, perRound, readers = "READTEST", 10000, 8
	if _, err := c.JetStream().CreateStream(ctx, natsjs.StreamConfig{
		Name: stream, Subjects: []string{"readtest.>"}, Replicas: 3, Storage: natsjs.FileStorage,
	}); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var stale, placed int
	total := 0
	restore := jetstream.SetConsumerPlaced(func(info *natsjs.ConsumerInfo) {
		mu.Lock()
		defer mu.Unlock()
		placed++
		if info.NumPending < uint64(total) {
			stale++
		}
	})
	defer restore()

	payload := []byte(strings.Repeat("x", 4096))
	for round := range 12 {
		victim := round % 3
		if err := cluster.Stop(victim); err != nil {
			t.Fatal(err)
		}
		// A client of a server that stays up (the cluster's client would be busy
		// reconnecting from the stopped one).
		c, err := jetstream.Connect(cluster.URLs[(victim+1)%3])
		if err != nil {
			t.Fatal(err)
		}
		// Publishes that get no answer (while the stopped server's streams elect leaders)
		// time out instead of holding the batch: the stream's count is read back below.
		nc, err := nats.Connect(cluster.URLs[(victim+1)%3])
		if err != nil {
			t.Fatal(err)
		}
		pub, err := natsjs.New(nc, natsjs.WithPublishAsyncTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for i := range perRound {
			if _, err := pub.PublishAsync(fmt.Sprintf("readtest.%d", i%4), payload); err != nil {
				t.Fatal(err)
			}
			if i%1000 == 999 {
				select {
				case <-pub.PublishAsyncComplete():
				case <-ctx.Done():
					t.Fatal("publishes not acknowledged")
				}
			}
		}
		// What the stream holds, as its leader says: a publish answered with an error
		// while the stopped server's streams elected leaders is not in it. A request
		// can be lost while they elect (no answer ever comes), so each try has its own
		// deadline.
		var info *natsjs.StreamInfo
		testutil.Eventually(t, time.Minute, fmt.Sprintf("round %d: the stream's state", round), func() error {
			ask, cancelAsk := context.WithTimeout(ctx, 5*time.Second)
			defer cancelAsk()
			st, err := c.JetStream().Stream(ask, stream)
			if err == nil {
				info, err = st.Info(ask)
			}
			return err
		}, 100*time.Millisecond)
		mu.Lock()
		total = int(info.State.Msgs)
		want := total
		mu.Unlock()
		if err := cluster.Restart(ctx, victim); err != nil {
			t.Fatal(err)
		}
		counts := make([]int, readers)
		errs := make([]error, readers)
		var wg sync.WaitGroup
		for r := range readers {
			wg.Go(func() {
				errs[r] = c.ReadUntil(ctx, stream, "readtest.>", nil, func(string, []byte) error {
					counts[r]++
					return nil
				})
			})
		}
		wg.Wait()
		for r := range readers {
			if errs[r] != nil {
				t.Fatalf("round %d, reader %d: %v", round, r, errs[r])
			}
			if counts[r] != want {
				t.Errorf("round %d (server %d restarted), reader %d: %d messages, want %d", round, victim, r, counts[r], want)
			}
		}
		c.Close()
		nc.Close()
		mu.Lock()
		done := stale > 0
		mu.Unlock()
		if done && round >= 2 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d reads' consumers, %d of them placed on a lagging replica; %d messages", placed, stale, total)
	if stale == 0 {
		t.Fatalf("no read's consumer was placed on a lagging replica in %d reads: the fault this test is about did not happen", placed)
	}
}
