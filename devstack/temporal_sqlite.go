package devstack

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opendlc/opendlc/internal/tools"
)

// temporalSQLiteDynamicConfig is the dynamic configuration of the Temporal server on
// SQLite: the dev server's own values (a host-level history cache of 8096 entries,
// 100 visibility queries a second per namespace) and OpenDLC's (temporal.go).
const temporalSQLiteDynamicConfig = temporalServerDynamicConfig + `history.hostLevelCacheMaxSize:
  - value: 8096
`

// startTemporalSQLite runs, for TemporalOptions.TLS, the Temporal server (the pinned
// temporal-server, the version the temporal CLI embeds) on dir/temporal.db with mutual
// TLS: the dev server (`temporal server start-dev`) has no TLS. The configuration is the
// dev server's (one SQLite file for persistence and visibility, one history shard,
// cluster "active" with initial failover version 1, the schema set up by the server when
// the file is new), so that a database made by either keeps its namespaces and
// workflows under the other. The namespace and the custom search attributes are
// registered through the API, as StartTemporalServer does.
func startTemporalSQLite(ctx context.Context, dir string, opts TemporalOptions) (*Temporal, error) {
	if opts.UI {
		return nil, errors.New("devstack: TemporalOptions.UI: the Web UI comes with the dev server, which has no TLS; it is not served with TemporalOptions.TLS")
	}
	bin, err := tools.Ensure(ctx, "temporal-server")
	if err != nil {
		return nil, err
	}
	srv, cli, err := temporalTLS(filepath.Join(dir, "tls"))
	if err != nil {
		return nil, err
	}
	tlsFiles := &temporalServerTLS{Server: srv, Client: cli}
	ctx, cancel := context.WithTimeout(ctx, temporalServerReadyTimeout)
	defer cancel()
	t, err := startTemporalSQLiteOnce(ctx, bin, dir, opts, tlsFiles)
	if t != nil && t.proc != nil && t.proc.AddrInUse() {
		t, err = startTemporalSQLiteOnce(ctx, bin, dir, opts, tlsFiles) // a picked port was taken: new ones
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// startTemporalSQLiteOnce makes one attempt. On failure it returns the stopped server
// too, so the caller can look at why it failed.
func startTemporalSQLiteOnce(ctx context.Context, bin, dir string, opts TemporalOptions, tlsFiles *temporalServerTLS) (*Temporal, error) {
	ports, err := pickTemporalServerPorts(opts.Port)
	if err != nil {
		return nil, err
	}
	params := temporalServerParams{SQLiteFile: filepath.Join(dir, "temporal.db"), Shards: 1, Ports: ports, TLS: tlsFiles}
	if err := writeTemporalServerConfig(filepath.Join(dir, "config"), params, temporalSQLiteDynamicConfig); err != nil {
		return nil, err
	}
	files := tlsFiles.Client
	t := &Temporal{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Frontend)), Namespace: opts.Namespace, TLS: &files, ports: ports}
	if t.tlsConfig, err = files.ClientConfig(); err != nil {
		return nil, err
	}
	args := []string{"--root", dir, "--config", "config", "--env", "development", "--allow-no-auth", "start"}
	t.proc, err = startPrivate("temporal-server", bin, args, filepath.Join(dir, "temporal.log"), childEnv("TEMPORAL_"))
	if err != nil {
		return nil, err
	}
	if err := t.proc.Poll(ctx, func(ctx context.Context) error { return checkHealth(ctx, t.Address, t.tlsConfig) }); err != nil {
		return t, errors.Join(err, t.Close())
	}
	if err := registerNamespace(ctx, t.Address, t.tlsConfig, opts.Namespace, 24*time.Hour); err != nil {
		return t, errors.Join(err, t.Close())
	}
	if err := t.proc.Poll(ctx, func(ctx context.Context) error { return visibilityReady(ctx, t.Address, t.tlsConfig, t.Namespace) }); err != nil {
		return t, errors.Join(err, t.Close())
	}
	return t, nil
}
