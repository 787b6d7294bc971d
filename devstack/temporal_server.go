package devstack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/opendlc/opendlc/internal/tools"
)

// temporalServerReadyTimeout bounds how long StartTemporalServer waits for the server
// and its namespace. The schema setup before it is bounded by the caller's ctx.
const temporalServerReadyTimeout = 2 * time.Minute

// Temporal's two databases on PostgreSQL: the persistence store and the visibility
// store, each set up from the server module's schema/postgresql/v12/<dir>.
var temporalDatabases = []struct{ name, schemaDir string }{
	{"temporal", "temporal"},
	{"temporal_visibility", "visibility"},
}

// TemporalServerOptions configures StartTemporalServer.
type TemporalServerOptions struct {
	// Dir holds the server's configuration (Dir/config) and temporal-server.log.
	Dir string
	// Postgres is the database server; StartTemporalServer creates and migrates
	// Temporal's two databases on it.
	Postgres *Postgres
	// Namespace is registered at start if missing, with the custom search attributes;
	// default DefaultNamespace.
	Namespace string
	// Retention is how long the namespace keeps closed workflows' histories; default 24h.
	Retention time.Duration
	// HistoryShards is numHistoryShards, fixed for the life of the databases; default 4.
	HistoryShards int
	// Port is the frontend gRPC port; 0 picks a free one. The other services' ports are
	// always picked free.
	Port int
	// TLS serves the frontend (gRPC and HTTP) and the services among themselves over
	// mutual TLS with a CA made for this server in Dir/tls (temporalTLS): a client
	// without the client certificate (TemporalServer.TLS) cannot connect.
	TLS bool
}

// TemporalServer is the Temporal server (go.temporal.io/server's cmd/server, every
// service in one process: frontend, history, matching, worker) on PostgreSQL, with
// SQL visibility: the production server, not the dev server (Temporal). Its schemas
// are set up and updated with temporal-sql-tool from the same module version.
type TemporalServer struct {
	// Address is the frontend gRPC address, host:port.
	Address string
	// Namespace is the namespace registered at start.
	Namespace string
	// Version is the server's module version.
	Version string
	// SchemaSetup is how long creating and migrating the databases took.
	SchemaSetup time.Duration
	// TLS are the client's files with TemporalServerOptions.TLS; nil without.
	TLS *TemporalTLSFiles

	tlsConfig *tls.Config
	proc      *process
	ports     temporalServerPorts
}

// StartTemporalServer builds (once) the server and its SQL tool, creates and migrates
// Temporal's databases on opts.Postgres (once: migrations already applied are skipped),
// writes the server's configuration, starts it, registers the namespace with its
// retention and the custom search attributes (SearchAttributes), and returns once a
// visibility query by one of them answers in that namespace.
func StartTemporalServer(ctx context.Context, opts TemporalServerOptions) (*TemporalServer, error) {
	if opts.Postgres == nil {
		return nil, errors.New("devstack: TemporalServerOptions.Postgres is required")
	}
	dir, err := mkdir(opts.Dir)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Retention == 0 {
		opts.Retention = 24 * time.Hour
	}
	if opts.HistoryShards == 0 {
		opts.HistoryShards = 4
	}
	server, err := tools.Ensure(ctx, "temporal-server")
	if err != nil {
		return nil, err
	}
	sqlTool, err := tools.Ensure(ctx, "temporal-sql-tool")
	if err != nil {
		return nil, err
	}
	module, err := tools.ModuleDir(ctx, "go.temporal.io/server")
	if err != nil {
		return nil, err
	}
	tool, _ := tools.Lookup("temporal-server")
	start := time.Now()
	if err := setupTemporalSchemas(ctx, sqlTool, filepath.Join(module, "schema", "postgresql", "v12"), opts.Postgres, dir); err != nil {
		return nil, err
	}
	setup := time.Since(start)

	var tlsFiles *temporalServerTLS
	if opts.TLS {
		srv, cli, err := temporalTLS(filepath.Join(dir, "tls"))
		if err != nil {
			return nil, err
		}
		tlsFiles = &temporalServerTLS{Server: srv, Client: cli}
	}

	ctx, cancel := context.WithTimeout(ctx, temporalServerReadyTimeout)
	defer cancel()
	t, err := startTemporalServer(ctx, server, dir, opts, tlsFiles)
	if t != nil && t.proc != nil && t.proc.AddrInUse() {
		t, err = startTemporalServer(ctx, server, dir, opts, tlsFiles) // a picked port was taken: new ones
	}
	if err != nil {
		return nil, err
	}
	t.Version, t.SchemaSetup = tool.Version, setup
	return t, nil
}

// setupTemporalSchemas creates each database, sets its schema up from version 0.0 and
// updates it to the newest version in schemaRoot. A database whose setup finished
// before (a marker file in dir) is only updated, which applies nothing when current.
func setupTemporalSchemas(ctx context.Context, sqlTool, schemaRoot string, pg *Postgres, dir string) error {
	for _, db := range temporalDatabases {
		base := []string{"--plugin", "postgres12", "--endpoint", pg.Host, "--port", strconv.Itoa(pg.Port),
			"--user", pg.User, "--database", db.name}
		marker := filepath.Join(dir, "schema-"+db.name+".done")
		if _, err := os.Stat(marker); errors.Is(err, os.ErrNotExist) {
			if err := runSQLTool(ctx, sqlTool, append(base, "create-database")...); err != nil {
				return err
			}
			if err := runSQLTool(ctx, sqlTool, append(base, "setup-schema", "-v", "0.0")...); err != nil {
				return err
			}
			if err := os.WriteFile(marker, nil, 0o600); err != nil {
				return fmt.Errorf("devstack: %w", err)
			}
		}
		versioned := filepath.Join(schemaRoot, db.schemaDir, "versioned")
		if err := runSQLTool(ctx, sqlTool, append(base, "update-schema", "-d", versioned)...); err != nil {
			return err
		}
	}
	return nil
}

func runSQLTool(ctx context.Context, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = childEnv("SQL_", "TEMPORAL_")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devstack: temporal-sql-tool %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// temporalServerPorts are the ports of the server's four services.
type temporalServerPorts struct {
	Frontend, FrontendHTTP, FrontendMembership int
	History, HistoryMembership                 int
	Matching, MatchingMembership               int
	Worker, WorkerMembership                   int
}

// startTemporalServer makes one attempt. On failure it returns the stopped server too,
// so the caller can look at why it failed.
func startTemporalServer(ctx context.Context, bin, dir string, opts TemporalServerOptions, tlsFiles *temporalServerTLS) (*TemporalServer, error) {
	ports, err := pickTemporalServerPorts(opts.Port)
	if err != nil {
		return nil, err
	}
	params := temporalServerParams{PG: opts.Postgres, Shards: opts.HistoryShards, Ports: ports, TLS: tlsFiles}
	if err := writeTemporalServerConfig(filepath.Join(dir, "config"), params, temporalServerDynamicConfig); err != nil {
		return nil, err
	}
	t := &TemporalServer{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports.Frontend)), Namespace: opts.Namespace, ports: ports}
	if tlsFiles != nil {
		files := tlsFiles.Client
		t.TLS = &files
		if t.tlsConfig, err = files.ClientConfig(); err != nil {
			return nil, err
		}
	}
	args := []string{"--root", dir, "--config", "config", "--env", "development", "--allow-no-auth", "start"}
	t.proc, err = startPrivate("temporal-server", bin, args, filepath.Join(dir, "temporal-server.log"), childEnv("TEMPORAL_"))
	if err != nil {
		return nil, err
	}
	if err := t.proc.Poll(ctx, t.healthy); err != nil {
		return t, errors.Join(err, t.Close())
	}
	if err := registerNamespace(ctx, t.Address, t.tlsConfig, opts.Namespace, opts.Retention); err != nil {
		return t, errors.Join(err, t.Close())
	}
	if err := t.proc.Poll(ctx, t.ready); err != nil {
		return t, errors.Join(err, t.Close())
	}
	return t, nil
}

// smallFreePort is a free port below 32768: the SQL schema keeps the services' ports in
// the cluster_membership table as a smallint, which the kernel's ephemeral range
// (freePort) overflows. Another process can take it before the server binds it; the
// caller retries once on that.
func smallFreePort() (int, error) {
	for range 100 {
		port := 20000 + rand.IntN(12000)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			l.Close()
			return port, nil
		}
	}
	return 0, errors.New("devstack: no free port below 32768")
}

// healthy checks that the frontend answers.
func (t *TemporalServer) healthy(ctx context.Context) error {
	return checkHealth(ctx, t.Address, t.tlsConfig)
}

// checkHealth checks that the frontend at address answers.
func checkHealth(ctx context.Context, address string, tlsConfig *tls.Config) error {
	c, err := dialTemporal(ctx, address, tlsConfig, "temporal-system")
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// ready checks what callers rely on: the namespace is known to the frontend (its
// cache refreshes every few seconds) and a visibility query by a custom search
// attribute answers.
func (t *TemporalServer) ready(ctx context.Context) error {
	return visibilityReady(ctx, t.Address, t.tlsConfig, t.Namespace)
}

// visibilityReady checks that a visibility query by a custom search attribute answers
// in namespace.
func visibilityReady(ctx context.Context, address string, tlsConfig *tls.Config, namespace string) error {
	c, err := dialTemporal(ctx, address, tlsConfig, namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().ListWorkflowExecutions(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: namespace, PageSize: 1, Query: SearchAttrWorkspace + " = 'ready-check'",
	})
	return err
}

// dialTemporal connects to the frontend at address, over mutual TLS with tlsConfig
// when it is not nil.
func dialTemporal(ctx context.Context, address string, tlsConfig *tls.Config, namespace string) (client.Client, error) {
	return client.DialContext(ctx, client.Options{
		HostPort: address, Namespace: namespace,
		Logger:            sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
		ConnectionOptions: client.ConnectionOptions{TLS: tlsConfig},
	})
}

// TLSConfig is the client's TLS configuration for the server with TLS
// (TemporalServerOptions.TLS), a copy of its own; nil without.
func (t *TemporalServer) TLSConfig() *tls.Config {
	if t.tlsConfig == nil {
		return nil
	}
	return t.tlsConfig.Clone()
}

// Pid is the server process's id.
func (t *TemporalServer) Pid() int { return t.proc.Pid() }

// LogTail is the end of the server's log, for a test that fails.
func (t *TemporalServer) LogTail(n int) string { return t.proc.LogTail(n) }

// Close stops the server (SIGTERM, then SIGKILL after stopTimeout). Its state is in
// PostgreSQL.
func (t *TemporalServer) Close() error {
	if t == nil || t.proc == nil {
		return nil
	}
	return t.proc.Stop()
}

// temporalServerParams fill temporalServerConfig: PG, or SQLiteFile for the SQLite
// store (schema set up by the server when the file is new, as the dev server's); TLS
// for mutual TLS everywhere.
type temporalServerParams struct {
	PG            *Postgres
	SQLiteFile    string
	Shards        int
	Ports         temporalServerPorts
	DynamicConfig string
	TLS           *temporalServerTLS
}

// temporalServerTLS are a server's files of mutual TLS: its own certificate, and the
// client certificate its system worker presents to its frontend.
type temporalServerTLS struct{ Server, Client TemporalTLSFiles }

// writeTemporalServerConfig writes the server's static configuration
// (dir/development.yaml) and its dynamic configuration (dir/dynamicconfig.yaml).
func writeTemporalServerConfig(dir string, p temporalServerParams, dynamic string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	p.DynamicConfig = filepath.Join(dir, "dynamicconfig.yaml")
	var b strings.Builder
	if err := temporalServerConfig.Execute(&b, p); err != nil {
		return fmt.Errorf("devstack: temporal server config: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "development.yaml"), []byte(b.String()), 0o600); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	if err := os.WriteFile(p.DynamicConfig, []byte(dynamic), 0o600); err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	return nil
}

// pickTemporalServerPorts picks the frontend's port (frontend, or free when 0) and
// free ports for the rest.
func pickTemporalServerPorts(frontend int) (temporalServerPorts, error) {
	var ports temporalServerPorts
	var err error
	if ports.Frontend, err = portOr(frontend); err != nil {
		return ports, err
	}
	for _, p := range []*int{&ports.FrontendHTTP, &ports.FrontendMembership, &ports.History, &ports.HistoryMembership,
		&ports.Matching, &ports.MatchingMembership, &ports.Worker, &ports.WorkerMembership} {
		if *p, err = smallFreePort(); err != nil {
			return ports, err
		}
	}
	return ports, nil
}

// temporalServerDynamicConfig: deleting a just-closed workflow waits until the transfer
// queue's ack level passes its close task; the default 30 s update interval would make
// `dlc job delete` wait that long (as on the dev server, temporal.go). Every job listing and
// search of the API is a visibility query, which the frontend limits to 10 a second per
// namespace by default: 8 listings at a time throttle each other into 10-second
// timeouts (docs/production.md); the dev server raises it to 100, and so does this.
// Eager activity execution (off by default in the server; the Go SDK asks for it when
// the activity runs on the workflow's own task queue): the activity a workflow task
// schedules comes back to the worker with that task's completion instead of through
// matching, which saved about 35 ms per activity of a job on this machine
// (docs/performance.md).
const temporalServerDynamicConfig = `history.transferProcessorUpdateAckInterval:
  - value: 1s
frontend.namespaceRPS.visibility:
  - value: 100
system.enableActivityEagerExecution:
  - value: true
`

// temporalServerConfig is the server's static configuration: PostgreSQL for
// persistence and visibility, every service on loopback, one cluster, no archival.
var temporalServerConfig = template.Must(template.New("temporal").Parse(`log:
  stdout: true
  level: warn

persistence:
{{- if .PG}}
  defaultStore: default
  visibilityStore: visibility
  numHistoryShards: {{.Shards}}
  datastores:
    default:
      sql:
        pluginName: postgres12
        databaseName: temporal
        connectAddr: "{{.PG.Address}}"
        connectProtocol: tcp
        user: {{.PG.User}}
        maxConns: 20
        maxIdleConns: 20
        maxConnLifetime: 1h
    visibility:
      sql:
        pluginName: postgres12
        databaseName: temporal_visibility
        connectAddr: "{{.PG.Address}}"
        connectProtocol: tcp
        user: {{.PG.User}}
        maxConns: 10
        maxIdleConns: 10
        maxConnLifetime: 1h
{{- else}}
  defaultStore: sqlite-default
  visibilityStore: sqlite-default
  numHistoryShards: {{.Shards}}
  datastores:
    sqlite-default:
      sql:
        pluginName: sqlite
        databaseName: {{printf "%q" .SQLiteFile}}
        connectAddr: localhost
        connectProtocol: tcp
        connectAttributes:
          mode: rwc
          setup: "true"
          journal_mode: wal
          synchronous: normal
        maxConns: 1
        maxIdleConns: 1
        maxConnLifetime: 1h
{{- end}}

global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: 127.0.0.1
{{- with .TLS}}
  tls:
    internode:
      server:
        certFile: {{printf "%q" .Server.CertFile}}
        keyFile: {{printf "%q" .Server.KeyFile}}
        requireClientAuth: true
        clientCaFiles: [{{printf "%q" .Server.CAFile}}]
      client:
        serverName: {{.Server.ServerName}}
        rootCaFiles: [{{printf "%q" .Server.CAFile}}]
    frontend:
      server:
        certFile: {{printf "%q" .Server.CertFile}}
        keyFile: {{printf "%q" .Server.KeyFile}}
        requireClientAuth: true
        clientCaFiles: [{{printf "%q" .Server.CAFile}}]
      client:
        serverName: {{.Server.ServerName}}
        rootCaFiles: [{{printf "%q" .Server.CAFile}}]
    systemWorker:
      certFile: {{printf "%q" .Client.CertFile}}
      keyFile: {{printf "%q" .Client.KeyFile}}
      client:
        serverName: {{.Client.ServerName}}
        rootCaFiles: [{{printf "%q" .Client.CAFile}}]
{{- end}}

services:
  frontend:
    rpc:
      grpcPort: {{.Ports.Frontend}}
      membershipPort: {{.Ports.FrontendMembership}}
      httpPort: {{.Ports.FrontendHTTP}}
      bindOnIP: 127.0.0.1
  history:
    rpc:
      grpcPort: {{.Ports.History}}
      membershipPort: {{.Ports.HistoryMembership}}
      bindOnIP: 127.0.0.1
  matching:
    rpc:
      grpcPort: {{.Ports.Matching}}
      membershipPort: {{.Ports.MatchingMembership}}
      bindOnIP: 127.0.0.1
  worker:
    rpc:
      grpcPort: {{.Ports.Worker}}
      membershipPort: {{.Ports.WorkerMembership}}
      bindOnIP: 127.0.0.1

clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: active
  currentClusterName: active
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: frontend
      rpcAddress: "127.0.0.1:{{.Ports.Frontend}}"

dcRedirectionPolicy:
  policy: noop

archival:
  history:
    state: disabled
  visibility:
    state: disabled

namespaceDefaults:
  archival:
    history:
      state: disabled
    visibility:
      state: disabled

dynamicConfigClient:
  filepath: "{{.DynamicConfig}}"
  pollInterval: 10s
`))
