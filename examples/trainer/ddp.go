package main

import (
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"
)

// Group links the ranks of a data-parallel job. Rank 0 is the hub: the other ranks each
// hold one TCP connection to it, and every exchange goes through it. Messages are gob
// streams, which carry float64s bit for bit, so all ranks end with identical weights.
type Group interface {
	// Rank is this process's rank, 0 to Size()-1.
	Rank() int
	// Size is the number of ranks (WORLD_SIZE).
	Size() int
	// Start makes every rank begin from rank 0's state: rank 0 sends st; the others
	// replace st with what they receive. This is how a resumed checkpoint, which only
	// rank 0 loads, reaches every rank.
	Start(ctx context.Context, st *syncState) error
	// Average replaces st.Model by the mean of every rank's model, weighted by the rows
	// each trained on, and st.Step by rank 0's. Every rank must call it once per epoch.
	Average(ctx context.Context, st *syncState, rows int) error
	// Close drops the connections.
	Close() error
}

// syncState is what the ranks agree on.
type syncState struct {
	Epoch int   // the last epoch completed
	Step  int64 // optimizer steps so far, as counted by rank 0
	Model Model
}

// clone is a copy of st that shares no memory with it (TrainEpoch updates weights in
// place).
func (st syncState) clone() syncState {
	st.Model.W = slices.Clone(st.Model.W)
	return st
}

// hello is a worker's first message.
type hello struct {
	Rank, World int
}

// message carries a state one way or the other. Rows is a worker's shard size.
type message struct {
	State syncState
	Rows  int
}

// single is the Group of a job of one process.
type single struct{}

func (single) Rank() int                                      { return 0 }
func (single) Size() int                                      { return 1 }
func (single) Start(context.Context, *syncState) error        { return nil }
func (single) Average(context.Context, *syncState, int) error { return nil }
func (single) Close() error                                   { return nil }

// peer is one end of a connection with its gob codec.
type peer struct {
	rank int
	conn net.Conn
	enc  *gob.Encoder
	dec  *gob.Decoder
}

func newPeer(rank int, c net.Conn) *peer {
	return &peer{rank: rank, conn: c, enc: gob.NewEncoder(c), dec: gob.NewDecoder(c)}
}

// hub is rank 0's Group.
type hub struct {
	world int
	peers []*peer // rank 1 first
}

// workerGroup is the Group of every rank but 0.
type workerGroup struct {
	rank, world int
	p           *peer
}

// listenHub accepts one connection from each rank 1..world-1 on ln, within timeout, and
// returns rank 0's Group. It closes ln once every rank has connected.
func listenHub(ctx context.Context, ln net.Listener, world int, timeout time.Duration) (Group, error) {
	defer ln.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	unblock := context.AfterFunc(ctx, func() { ln.Close() })
	defer unblock()

	byRank := make([]*peer, world)
	closeAll := func() {
		for _, p := range byRank {
			if p != nil {
				p.conn.Close()
			}
		}
	}
	for joined := 1; joined < world; {
		c, err := ln.Accept()
		if err != nil {
			closeAll()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("rendezvous: %d of %d ranks joined within %s: %w", joined, world, timeout, context.Cause(ctx))
			}
			return nil, fmt.Errorf("rendezvous: accept: %w", err)
		}
		var h hello
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		p := newPeer(0, c)
		if err := p.dec.Decode(&h); err != nil {
			// Not one of ours (a port scan, a health probe): ignore it.
			c.Close()
			continue
		}
		_ = c.SetReadDeadline(time.Time{})
		switch {
		case h.World != world:
			c.Close()
			closeAll()
			return nil, fmt.Errorf("rendezvous: rank %d says WORLD_SIZE=%d, rank 0 has %d", h.Rank, h.World, world)
		case h.Rank < 1 || h.Rank >= world:
			c.Close()
			closeAll()
			return nil, fmt.Errorf("rendezvous: a peer says it is rank %d of %d", h.Rank, world)
		case byRank[h.Rank] != nil:
			c.Close()
			closeAll()
			return nil, fmt.Errorf("rendezvous: two processes claim rank %d", h.Rank)
		}
		p.rank = h.Rank
		byRank[h.Rank] = p
		joined++
	}
	return &hub{world: world, peers: byRank[1:]}, nil
}

// dialHub connects rank (>= 1) to rank 0 at addr, retrying until timeout, since rank 0 may
// start later than this process.
func dialHub(ctx context.Context, addr string, rank, world int, timeout time.Duration) (Group, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	wait := 100 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			p := newPeer(0, c)
			if err := p.enc.Encode(hello{Rank: rank, World: world}); err != nil {
				c.Close()
				return nil, fmt.Errorf("rendezvous: greet rank 0 at %s: %w", addr, err)
			}
			return &workerGroup{rank: rank, world: world, p: p}, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rendezvous: rank 0 at %s not reachable within %s: %w", addr, timeout, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (g *hub) Rank() int { return 0 }
func (g *hub) Size() int { return g.world }

func (g *hub) Start(ctx context.Context, st *syncState) error {
	defer g.watch(ctx)()
	for _, p := range g.peers {
		if err := p.enc.Encode(message{State: *st}); err != nil {
			return g.fail(ctx, p, "send start state", err)
		}
	}
	return nil
}

func (g *hub) Average(ctx context.Context, st *syncState, rows int) error {
	defer g.watch(ctx)()
	models := []Model{st.Model}
	counts := []int{rows}
	for _, p := range g.peers {
		var m message // a fresh value: gob leaves fields it does not receive untouched
		if err := p.dec.Decode(&m); err != nil {
			return g.fail(ctx, p, "receive weights", err)
		}
		if m.State.Epoch != st.Epoch {
			return fmt.Errorf("ddp: rank %d is at epoch %d, rank 0 at %d", p.rank, m.State.Epoch, st.Epoch)
		}
		models = append(models, m.State.Model)
		counts = append(counts, m.Rows)
	}
	st.Model = weightedAverage(models, counts)
	for _, p := range g.peers {
		if err := p.enc.Encode(message{State: *st}); err != nil {
			return g.fail(ctx, p, "send averaged weights", err)
		}
	}
	return nil
}

func (g *hub) Close() error {
	var errs []error
	for _, p := range g.peers {
		errs = append(errs, p.conn.Close())
	}
	return errors.Join(errs...)
}

// watch closes every connection if ctx ends while an exchange is blocked, so a stopped
// job does not hang on a silent peer. The returned func ends the watch.
func (g *hub) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() { g.Close() })
}

func (g *hub) fail(ctx context.Context, p *peer, what string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("ddp: %s, rank %d: %w (did it exit?)", what, p.rank, err)
}

func (g *workerGroup) Rank() int { return g.rank }
func (g *workerGroup) Size() int { return g.world }

func (g *workerGroup) Start(ctx context.Context, st *syncState) error {
	defer g.watch(ctx)()
	var m message
	if err := g.p.dec.Decode(&m); err != nil {
		return g.fail(ctx, "receive start state", err)
	}
	*st = m.State
	return nil
}

func (g *workerGroup) Average(ctx context.Context, st *syncState, rows int) error {
	defer g.watch(ctx)()
	if err := g.p.enc.Encode(message{State: *st, Rows: rows}); err != nil {
		return g.fail(ctx, "send weights", err)
	}
	var m message
	if err := g.p.dec.Decode(&m); err != nil {
		return g.fail(ctx, "receive averaged weights", err)
	}
	if m.State.Epoch != st.Epoch {
		return fmt.Errorf("ddp: rank 0 answered for epoch %d, this rank is at %d", m.State.Epoch, st.Epoch)
	}
	*st = m.State
	return nil
}

func (g *workerGroup) Close() error { return g.p.conn.Close() }

func (g *workerGroup) watch(ctx context.Context) func() bool {
	return context.AfterFunc(ctx, func() { g.p.conn.Close() })
}

func (g *workerGroup) fail(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("ddp: %s from rank 0: %w (did it exit?)", what, err)
}
