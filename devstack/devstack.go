// Package devstack starts the real components OpenDLC runs on (Temporal,
// NATS JetStream and an S3 gateway) on the loopback interface, with their
// state in a directory so that it survives a restart. `dlc up` and the
// integration tests use it; nothing here is meant for production.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/opendlc/opendlc/internal/freeport"
)

// Options configures Start.
type Options struct {
	// Dir holds every component's state: Dir/temporal, Dir/nats, Dir/s3. Start makes
	// it, when it does not exist, mode 0700 (0711 with TemporalOnPostgres); each
	// component's directory is made (or narrowed to) 0700, and the servers create their
	// files 0600.
	Dir string
	// UI serves the Temporal Web UI.
	UI bool
	// Namespace is the Temporal namespace to create; default "default".
	Namespace string
	// Buckets are created in S3 at start.
	Buckets []string
	// EventSubject is the NATS subject for S3 bucket notifications; default DefaultEventSubject.
	EventSubject string
	// Ports; 0 picks a free port.
	TemporalPort, TemporalUIPort, NATSPort, S3Port int
	// S3Host is the address S3 listens on (S3Options.Host); default 127.0.0.1.
	S3Host string
	// S3IAM runs the gateway's internal IAM (S3Options.IAM), for per-workspace accounts.
	S3IAM bool
	// NATSTLS serves NATS over TLS (NATSOptions.TLS). NATS always requires
	// authentication (NATSOptions.Secure).
	NATSTLS bool
	// TemporalOnPostgres runs the Temporal server on PostgreSQL (StartPostgres in
	// Dir/postgres, StartTemporalServer in Dir/temporal-server), the production
	// server, instead of the dev server on SQLite; for measuring at scale. Every
	// directory above Dir must let others through (PostgresOptions.Dir). UI and
	// TemporalUIPort are ignored.
	TemporalOnPostgres bool
	// TemporalTLS requires mutual TLS of every client of Temporal, the dev server's
	// replacement on SQLite (TemporalOptions.TLS) or the server on PostgreSQL
	// (TemporalServerOptions.TLS): Stack.Temporal.TLSConfig is what its clients dial
	// with. UI cannot be had with it.
	TemporalTLS bool
}

// Stack is a running set of all three components.
type Stack struct {
	// Temporal is where Temporal answers: the dev server, or with
	// Options.TemporalOnPostgres the address and namespace of TemporalServer; with
	// Options.TemporalTLS its TLS files and TLSConfig are what clients dial with.
	Temporal *Temporal
	NATS     *NATS
	S3       *S3
	// TemporalServer and Postgres are set with Options.TemporalOnPostgres.
	TemporalServer *TemporalServer
	Postgres       *Postgres
}

// Start starts NATS, then S3 (publishing bucket notifications to NATS), and
// Temporal alongside them. On error, whatever had started is closed again.
// ctx bounds the start only; the servers run until Close.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.Dir == "" {
		return nil, errors.New("devstack: Options.Dir is required")
	}
	// The state directory is this user's alone: its servers' databases, objects, logs
	// and passwords. PostgreSQL runs as its own user, which must pass through it. One
	// that exists keeps its mode (it may be a directory of other uses): what is in it
	// is made private below.
	mode := os.FileMode(0o700)
	if opts.TemporalOnPostgres {
		mode = 0o711
	}
	if err := os.MkdirAll(opts.Dir, mode); err != nil {
		return nil, fmt.Errorf("devstack: %w", err)
	}
	type temporalResult struct {
		t   *Temporal
		err error
	}
	s := &Stack{}
	temporalDone := make(chan temporalResult, 1)
	go func() {
		if opts.TemporalOnPostgres {
			t, err := s.startTemporalOnPostgres(ctx, opts)
			temporalDone <- temporalResult{t, err}
			return
		}
		t, err := StartTemporal(ctx, TemporalOptions{
			Dir:       filepath.Join(opts.Dir, "temporal"),
			UI:        opts.UI,
			Namespace: opts.Namespace,
			Port:      opts.TemporalPort,
			UIPort:    opts.TemporalUIPort,
			TLS:       opts.TemporalTLS,
		})
		temporalDone <- temporalResult{t, err}
	}()

	n, err := StartNATS(ctx, NATSOptions{Dir: filepath.Join(opts.Dir, "nats"), Port: opts.NATSPort, Secure: true, TLS: opts.NATSTLS})
	if err == nil {
		s.NATS = n
		s.S3, err = StartS3(ctx, S3Options{
			Dir:          filepath.Join(opts.Dir, "s3"),
			Port:         opts.S3Port,
			Host:         opts.S3Host,
			NATSURL:      n.URLFor(NATSUserS3),
			NATSCAFile:   n.CAFile,
			EventSubject: opts.EventSubject,
			Buckets:      opts.Buckets,
			IAM:          opts.S3IAM,
		})
	}
	tr := <-temporalDone
	s.Temporal = tr.t
	if err = errors.Join(err, tr.err); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// startTemporalOnPostgres starts PostgreSQL and the Temporal server on it, and
// returns the server's address and namespace as a Temporal (with no process of its
// own: Close stops TemporalServer and Postgres). It sets s.Postgres and
// s.TemporalServer as they start, for Close.
func (s *Stack) startTemporalOnPostgres(ctx context.Context, opts Options) (*Temporal, error) {
	pg, err := StartPostgres(ctx, PostgresOptions{Dir: filepath.Join(opts.Dir, "postgres")})
	if err != nil {
		return nil, err
	}
	s.Postgres = pg
	ts, err := StartTemporalServer(ctx, TemporalServerOptions{
		Dir:       filepath.Join(opts.Dir, "temporal-server"),
		Postgres:  pg,
		Namespace: opts.Namespace,
		Port:      opts.TemporalPort,
		TLS:       opts.TemporalTLS,
	})
	if err != nil {
		return nil, err
	}
	s.TemporalServer = ts
	return &Temporal{Address: ts.Address, Namespace: ts.Namespace, TLS: ts.TLS, tlsConfig: ts.tlsConfig, ports: ts.ports}, nil
}

// Close stops the components in the reverse order of their dependencies:
// Temporal (and its PostgreSQL), S3, then NATS.
func (s *Stack) Close() error {
	var errs []error
	if s.Temporal != nil {
		errs = append(errs, s.Temporal.Close())
	}
	if s.TemporalServer != nil {
		errs = append(errs, s.TemporalServer.Close())
	}
	if s.Postgres != nil {
		errs = append(errs, s.Postgres.Close())
	}
	if s.S3 != nil {
		errs = append(errs, s.S3.Close())
	}
	if s.NATS != nil {
		errs = append(errs, s.NATS.Close())
	}
	return errors.Join(errs...)
}

// freePort returns a free TCP port on 127.0.0.1 from below the kernel's ephemeral
// range (package freeport says why). Another process can still take it before our
// server binds it; callers retry once on that.
func freePort() (int, error) {
	port, err := freeport.One()
	if err != nil {
		return 0, fmt.Errorf("devstack: %w", err)
	}
	return port, nil
}

// portOr returns port, or a free port when it is 0.
func portOr(port int) (int, error) {
	if port != 0 {
		return port, nil
	}
	return freePort()
}

// mkdir makes a component's state directory mode 0700 (narrowed to it when an earlier
// version made it wider), and what is missing above it as before (0755: PostgreSQL's
// user must pass), and returns its absolute path.
func mkdir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("devstack: a state directory is required")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	if err := os.Chmod(abs, 0o700); err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	return abs, nil
}
