package devstack

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/internal/testutil"
)

// A three-server cluster keeps an R3 stream writable and readable with one server
// stopped, and the restarted server holds a current replica again, with every message.
func TestNATSClusterKeepsR3StreamAcrossAServerRestart(t *testing.T) {
	ctx := testContext(t, 2*time.Minute)
	c, err := StartNATSCluster(ctx, NATSClusterOptions{Dir: t.TempDir(), Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := nats.Connect(c.URL()); err == nil {
		t.Fatal("an anonymous client was admitted")
	}
	nc, err := nats.Connect(c.URL(), c.ClientOptions(NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	// Each publish waits at most 5 s for its ack and is sent again under the same
	// message id (the stream drops the duplicate) until the test's deadline: a request
	// sent while the client reconnects, or while the stream elects a leader, can be
	// lost without an answer.
	sent := 0
	publish := func(n int) {
		for range n {
			id := fmt.Sprintf("m-%d", sent)
			for {
				pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, err := js.Publish(pctx, "r3.x", []byte("m"), jetstream.WithMsgID(id))
				cancel()
				if err == nil {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("publish %s: %v", id, err)
				case <-time.After(100 * time.Millisecond):
				}
			}
			sent++
		}
	}
	publish(10)
	leader := s.CachedInfo().Cluster.Leader
	victim := -1
	for i := range c.Nodes {
		if "opendlc-"+string(rune('0'+i)) == leader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("leader %q is none of the servers", leader)
	}
	if err := c.Stop(victim); err != nil {
		t.Fatal(err)
	}
	publish(10) // through a new leader
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 20 || info.Cluster.Leader == leader {
		t.Fatalf("with server %d stopped: %d messages, leader %s", victim, info.State.Msgs, info.Cluster.Leader)
	}
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, fmt.Sprintf("server %d catches up", victim), func() error {
		info, err = s.Info(ctx)
		if err != nil {
			return err
		}
		if len(info.Cluster.Replicas) != 2 || !info.Cluster.Replicas[0].Current || !info.Cluster.Replicas[1].Current ||
			info.Cluster.Replicas[0].Offline || info.Cluster.Replicas[1].Offline {
			return fmt.Errorf("replicas %+v", info.Cluster.Replicas)
		}
		return nil
	}, 100*time.Millisecond)
	if info.State.Msgs != 20 {
		t.Errorf("%d messages after the restart, want 20", info.State.Msgs)
	}
}
