package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// natsClusterReadyTimeout bounds how long StartNATSCluster and Restart wait for the
// cluster's JetStream; a restarted server catches up on every stream it holds a replica
// of, which on a loaded two-core machine takes tens of seconds.
const natsClusterReadyTimeout = 2 * time.Minute

// natsReadyProbeTimeout bounds one JetStream call of a readiness probe: a request sent
// while the meta group has no leader may get no answer at all, and the probe asks again
// instead of waiting for it until the whole wait is over.
const natsReadyProbeTimeout = 3 * time.Second

// NATSClusterOptions configures StartNATSCluster.
type NATSClusterOptions struct {
	// Dir holds one directory per server, Dir/n0, Dir/n1, ... (each a NATSOptions.Dir).
	Dir string
	// Size is the number of servers; default 3, the smallest cluster that keeps a
	// replicated stream (R3) available with one server down.
	Size int
	// Name is the cluster's name; default "opendlc".
	Name string
	// Secure turns on authentication with the stack's own identities
	// (NATSOptions.Secure), the same passwords on every server.
	Secure bool
}

// NATSCluster is a cluster of embedded NATS servers with JetStream, joined by routes on
// loopback. Each server keeps its client and route ports and its JetStream store across
// Stop and Restart, as a server of a real cluster does across a crash.
type NATSCluster struct {
	// Nodes are the servers, by index; a stopped one is nil until restarted.
	Nodes []*NATS
	// URLs are the servers' client URLs, by index.
	URLs []string

	opts      []NATSOptions
	passwords map[string]string
}

// StartNATSCluster starts Size servers and returns once the cluster's JetStream has a
// leader and every server has joined it.
func StartNATSCluster(ctx context.Context, opts NATSClusterOptions) (_ *NATSCluster, err error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: NATSClusterOptions.Dir is required")
	}
	if opts.Size == 0 {
		opts.Size = 3
	}
	if opts.Name == "" {
		opts.Name = "opendlc"
	}
	c := &NATSCluster{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	// Fixed ports, so that every server names the others' routes and a restarted server
	// comes back where its clients and peers look for it.
	clientPorts, routePorts := make([]int, opts.Size), make([]int, opts.Size)
	for i := range opts.Size {
		if clientPorts[i], err = freePort(); err != nil {
			return nil, err
		}
		if routePorts[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	var usersFile []byte
	for i := range opts.Size {
		dir, err := mkdir(filepath.Join(opts.Dir, "n"+strconv.Itoa(i)))
		if err != nil {
			return nil, err
		}
		if opts.Secure {
			// One set of passwords for every server: the first server's, copied.
			path := filepath.Join(dir, NATSUsersFile)
			if i == 0 {
				if c.passwords, err = loadPasswords(path); err != nil {
					return nil, err
				}
				if usersFile, err = os.ReadFile(path); err != nil {
					return nil, fmt.Errorf("devstack: %w", err)
				}
			} else if err := writePrivate(path, usersFile); err != nil {
				return nil, fmt.Errorf("devstack: nats users: %w", err)
			}
		}
		var routes []string
		for j, p := range routePorts {
			if j != i {
				routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(p))
			}
		}
		c.opts = append(c.opts, NATSOptions{
			Dir: dir, Port: clientPorts[i], Secure: opts.Secure, ServerName: "opendlc-" + strconv.Itoa(i),
			Cluster: &NATSRoutes{Name: opts.Name, Port: routePorts[i], Routes: routes},
		})
		c.URLs = append(c.URLs, "nats://127.0.0.1:"+strconv.Itoa(clientPorts[i]))
	}
	c.Nodes = make([]*NATS, opts.Size)
	for i := range opts.Size {
		if c.Nodes[i], err = StartNATS(ctx, c.opts[i]); err != nil {
			return nil, fmt.Errorf("devstack: nats server %d: %w", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, natsClusterReadyTimeout)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// URL is every server's client URL, comma-separated, as NATS clients take a cluster.
func (c *NATSCluster) URL() string { return strings.Join(c.URLs, ",") }

// Password is the password of one of the stack's identities (NATSOptions.Secure).
func (c *NATSCluster) Password(user string) string { return c.passwords[user] }

// ClientOptions are the connection options of one of the stack's identities.
func (c *NATSCluster) ClientOptions(user string) []nats.Option {
	if pw := c.passwords[user]; pw != "" {
		return []nats.Option{nats.UserInfo(user, pw)}
	}
	return nil
}

// WaitReady waits until every running server sees all the others through routes and
// the cluster's JetStream has a leader that counts every running server as a current
// peer.
func (c *NATSCluster) WaitReady(ctx context.Context) error {
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		err := c.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: nats cluster not ready: %w (last: %w)", ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

func (c *NATSCluster) ready(ctx context.Context) error {
	running := 0
	for _, n := range c.Nodes {
		if n != nil {
			running++
		}
	}
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		if got := n.Server.NumRoutes(); got < running-1 {
			return fmt.Errorf("server %d has %d routes, want %d", i, got, running-1)
		}
		if !n.Server.JetStreamIsCurrent() {
			return fmt.Errorf("server %d: JetStream not current with the cluster", i)
		}
	}
	// A JetStream call through a client answers once the meta group has a leader.
	i := c.running()
	if i < 0 {
		return errors.New("no server is running")
	}
	nc, err := nats.Connect(c.URLs[i], c.ClientOptions(NATSUserServer)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := natsjs.New(nc)
	if err != nil {
		return err
	}
	probe, cancel := context.WithTimeout(ctx, natsReadyProbeTimeout)
	defer cancel()
	if _, err := js.AccountInfo(probe); err != nil {
		return fmt.Errorf("server %d: JetStream account info: %w", i, err)
	}
	return nil
}

// running is the index of a running server, or -1.
func (c *NATSCluster) running() int {
	for i, n := range c.Nodes {
		if n != nil {
			return i
		}
	}
	return -1
}

// Stop shuts server i down, as a crash would take it away from its clients and peers;
// its JetStream store stays for Restart.
func (c *NATSCluster) Stop(i int) error {
	n := c.Nodes[i]
	if n == nil {
		return fmt.Errorf("devstack: nats server %d is not running", i)
	}
	c.Nodes[i] = nil
	return n.Close()
}

// Restart starts server i again on its directory and ports, and waits until it has
// rejoined the cluster.
func (c *NATSCluster) Restart(ctx context.Context, i int) error {
	if c.Nodes[i] != nil {
		return fmt.Errorf("devstack: nats server %d is running", i)
	}
	n, err := StartNATS(ctx, c.opts[i])
	if err != nil {
		return fmt.Errorf("devstack: nats server %d: %w", i, err)
	}
	c.Nodes[i] = n
	ctx, cancel := context.WithTimeout(ctx, natsClusterReadyTimeout)
	defer cancel()
	return c.WaitReady(ctx)
}

// Close shuts every running server down.
func (c *NATSCluster) Close() error {
	var errs []error
	for i, n := range c.Nodes {
		if n != nil {
			errs = append(errs, n.Close())
			c.Nodes[i] = nil
		}
	}
	return errors.Join(errs...)
}
