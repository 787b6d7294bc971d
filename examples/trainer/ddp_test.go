package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// formGroup runs a rendezvous of world ranks over loopback and returns their Groups,
// rank 0 first.
func formGroup(t *testing.T, ctx context.Context, world int) []Group {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	groups := make([]Group, world)
	errs := make([]error, world)
	var wg sync.WaitGroup
	for rank := range world {
		wg.Go(func() {
			if rank == 0 {
				groups[0], errs[0] = listenHub(ctx, ln, world, 10*time.Second)
			} else {
				groups[rank], errs[rank] = dialHub(ctx, ln.Addr().String(), rank, world, 10*time.Second)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, g := range groups {
			g.Close()
		}
	})
	return groups
}

func testConfig(p Params) config {
	return config{Params: p, Seed: 1, CheckpointEvery: 1, ExitCode: 1}
}

// TestDataParallelRanksAgree trains with several ranks in one process, over loopback, and
// checks that every rank ends with the very same weights, and a good model.
func TestDataParallelRanksAgree(t *testing.T) {
	for _, world := range []int{2, 3} {
		t.Run(fmt.Sprintf("world=%d", world), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			train, test := shippedData(t)
			groups := formGroup(t, ctx, world)
			results := make([]result, world)
			errs := make([]error, world)
			outs := make([]bytes.Buffer, world)
			var wg sync.WaitGroup
			for rank := range world {
				wg.Go(func() {
					tr := &trainer{cfg: testConfig(Params{LR: 0.2, Epochs: 10, BatchSize: 32, L2: 1e-4}),
						train: train, test: test, group: groups[rank], out: &outs[rank], log: &outs[rank]}
					results[rank], errs[rank] = tr.run(ctx)
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			for rank := 1; rank < world; rank++ {
				// Exact equality, bit for bit: no tolerance.
				if diff := cmp.Diff(results[0].syncState, results[rank].syncState); diff != "" {
					t.Errorf("rank %d ends differently from rank 0 (-rank 0 +rank %d):\n%s", rank, rank, diff)
				}
				if strings.Contains(outs[rank].String(), "dlc:metric") {
					t.Errorf("rank %d printed metrics; only rank 0 should:\n%s", rank, outs[rank].String())
				}
			}
			if n := strings.Count(outs[0].String(), "dlc:metric epoch="); n != 10 {
				t.Errorf("rank 0 printed %d metric lines, want 10:\n%s", n, outs[0].String())
			}
			wantSteps := int64(10 * ((train.Len()/world + 31) / 32))
			if results[0].Epoch != 10 || results[0].Step != wantSteps {
				t.Errorf("ended at epoch %d step %d, want 10 and %d", results[0].Epoch, results[0].Step, wantSteps)
			}
			t.Logf("world %d: loss %.4f, accuracy %.4f", world, results[0].Loss, results[0].Accuracy)
			if results[0].Accuracy < 0.85 {
				t.Errorf("accuracy %.4f, want >= 0.85", results[0].Accuracy)
			}
		})
	}
}

// TestStartBroadcastsRankZeroState checks that a resumed state reaches the other ranks
// whole, zero values included (gob skips zero fields, which must not leave stale values).
func TestStartBroadcastsRankZeroState(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	groups := formGroup(t, ctx, 2)
	sent := syncState{Epoch: 3, Step: 189, Model: Model{W: []float64{0, -1.5, 0}, B: 0}}
	got := syncState{Epoch: 9, Step: 9, Model: Model{W: []float64{9, 9, 9}, B: 9}}
	errc := make(chan error, 1)
	go func() { errc <- groups[0].Start(ctx, &sent) }()
	if err := groups[1].Start(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sent, got); diff != "" {
		t.Errorf("rank 1's state (-sent +got):\n%s", diff)
	}
}

func TestRendezvousErrors(t *testing.T) {
	t.Run("world size mismatch", func(t *testing.T) {
		err := rendezvousWith(t, 2, 300*time.Millisecond, func(addr string) {
			_, _ = dialHub(context.Background(), addr, 1, 3, time.Second)
		})
		wantErr(t, err, "rank 1 says WORLD_SIZE=3, rank 0 has 2")
	})
	t.Run("duplicate rank", func(t *testing.T) {
		err := rendezvousWith(t, 3, 5*time.Second, func(addr string) {
			_, _ = dialHub(context.Background(), addr, 1, 3, time.Second)
			_, _ = dialHub(context.Background(), addr, 1, 3, time.Second)
		})
		wantErr(t, err, "two processes claim rank 1")
	})
	t.Run("a rank never comes", func(t *testing.T) {
		err := rendezvousWith(t, 3, 300*time.Millisecond, func(addr string) {
			_, _ = dialHub(context.Background(), addr, 2, 3, time.Second)
		})
		wantErr(t, err, "2 of 3 ranks joined within 300ms")
	})
	t.Run("a stranger is ignored", func(t *testing.T) {
		err := rendezvousWith(t, 2, 5*time.Second, func(addr string) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			c.Close()
			_, _ = dialHub(context.Background(), addr, 1, 2, time.Second)
		})
		if err != nil {
			t.Fatalf("rendezvous after a stray connection: %v", err)
		}
	})
	t.Run("rank 0 never comes", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		start := time.Now()
		_, err = dialHub(context.Background(), addr, 1, 2, 500*time.Millisecond)
		wantErr(t, err, "not reachable within 500ms")
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("gave up after %s", d)
		}
	})
}

// rendezvousWith runs rank 0's side of a rendezvous while peers runs the others'.
func rendezvousWith(t *testing.T, world int, timeout time.Duration, peers func(addr string)) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go peers(ln.Addr().String())
	g, err := listenHub(context.Background(), ln, world, timeout)
	if g != nil {
		g.Close()
	}
	return err
}

func wantErr(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want one containing %q", err, want)
	}
}

func TestPeerLoss(t *testing.T) {
	for name, tc := range map[string]struct {
		closed, waiting int // the rank that exits, the rank that averages
		want            string
	}{
		"rank 0 sees a worker exit": {closed: 1, waiting: 0, want: "receive weights, rank 1"},
		"a worker sees rank 0 exit": {closed: 0, waiting: 1, want: "from rank 0"},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			groups := formGroup(t, ctx, 2)
			groups[tc.closed].Close()
			st := syncState{Epoch: 1, Model: NewModel(2)}
			wantErr(t, groups[tc.waiting].Average(ctx, &st, 10), tc.want)
		})
	}
	t.Run("a stop unblocks a waiting rank", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		groups := formGroup(t, ctx, 2)
		stop, stopNow := context.WithCancelCause(ctx)
		errc := make(chan error, 1)
		go func() {
			st := syncState{Epoch: 1, Model: NewModel(2)}
			errc <- groups[0].Average(stop, &st, 10) // rank 1 never sends
		}()
		stopNow(errors.New("stopped by test"))
		select {
		case err := <-errc:
			wantErr(t, err, "stopped by test")
		case <-ctx.Done():
			t.Fatal("Average did not return after its context ended")
		}
	})
}
