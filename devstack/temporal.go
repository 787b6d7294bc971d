package devstack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/opendlc/opendlc/internal/tools"
)

// Names of the custom search attributes OpenDLC indexes its workflows by, so
// that listing and search go through Temporal visibility.
const (
	SearchAttrWorkspace = "DlcWorkspace"
	SearchAttrKind      = "DlcKind"
	SearchAttrPhase     = "DlcPhase"
	SearchAttrOwner     = "DlcOwner"
	SearchAttrName      = "DlcName"
	SearchAttrFramework = "DlcFramework"
	// SearchAttrLabels holds a job's labels as "key=value" keywords.
	SearchAttrLabels = "DlcLabels"
)

// SearchAttributes maps every custom search attribute to its type; the dev
// server registers them in its namespace at start.
var SearchAttributes = map[string]enumspb.IndexedValueType{
	SearchAttrWorkspace: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrKind:      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrPhase:     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrOwner:     enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrName:      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrFramework: enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	SearchAttrLabels:    enumspb.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

// DefaultNamespace is the Temporal namespace used when none is given.
const DefaultNamespace = "default"

// temporalReadyTimeout bounds how long StartTemporal waits for the server.
const temporalReadyTimeout = 60 * time.Second

// TemporalOptions configures StartTemporal.
type TemporalOptions struct {
	// Dir is the state directory; the SQLite database and temporal.log go here.
	Dir string
	// UI serves the Temporal Web UI.
	UI bool
	// Namespace is created at start if missing; default DefaultNamespace.
	Namespace string
	// Port is the frontend gRPC port and UIPort the Web UI port; 0 picks a free port.
	Port, UIPort int
	// TLS requires mutual TLS of every client, with a CA, server and client
	// certificates made for this installation in Dir/tls on first start: a process
	// without the client certificate (Temporal.TLS) cannot connect. The dev server has
	// no TLS, so this runs the Temporal server (temporal_sqlite.go) on the same SQLite
	// file instead: a database either made keeps its workflows under the other. UI is
	// refused with TLS: the Web UI is part of the dev server only.
	TLS bool
}

// Temporal is a running Temporal dev server (`temporal server start-dev`) backed by
// SQLite, or with TemporalOptions.TLS the Temporal server on the same SQLite file,
// requiring mutual TLS of its clients.
type Temporal struct {
	// Address is the frontend gRPC address, host:port.
	Address string
	// UIAddress is the Web UI's host:port, or "" without a UI.
	UIAddress string
	// Namespace is the namespace created at start.
	Namespace string
	// TLS are the files a client needs with TemporalOptions.TLS (or
	// TemporalServerOptions.TLS): the CA, the client certificate and its key; nil
	// without TLS. TLSConfig is the same, loaded.
	TLS *TemporalTLSFiles

	tlsConfig *tls.Config
	proc      *process
	// ports are the Temporal server's with TLS; zero for the dev server.
	ports temporalServerPorts
}

// TLSConfig is the client's TLS configuration (client certificate, the
// installation's CA) with TLS, a copy of its own for each caller; nil without. Every
// client of the server passes it as client.ConnectionOptions.TLS.
func (t *Temporal) TLSConfig() *tls.Config {
	if t.tlsConfig == nil {
		return nil
	}
	return t.tlsConfig.Clone()
}

// StartTemporal builds (once) and starts the Temporal dev server (with opts.TLS the
// Temporal server, startTemporalSQLite) and waits until its namespace is usable and has
// the custom search attributes.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	dir, err := mkdir(opts.Dir)
	if err != nil {
		return nil, err
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.TLS {
		return startTemporalSQLite(ctx, dir, opts)
	}
	bin, err := tools.Ensure(ctx, "temporal")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, temporalReadyTimeout)
	defer cancel()

	t, err := startTemporal(ctx, bin, dir, opts)
	if t != nil && t.proc.AddrInUse() {
		// A port we (or the server, for its internal services) found free
		// was taken before it was bound. A second try picks new ones.
		t, err = startTemporal(ctx, bin, dir, opts)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

// startTemporal makes one attempt. On failure it returns the stopped
// Temporal too, so the caller can look at why it failed.
func startTemporal(ctx context.Context, bin, dir string, opts TemporalOptions) (*Temporal, error) {
	port, err := portOr(opts.Port)
	if err != nil {
		return nil, err
	}
	args := []string{"server", "start-dev",
		"--ip", "127.0.0.1",
		"--port", strconv.Itoa(port),
		"--db-filename", filepath.Join(dir, "temporal.db"),
		"--log-level", "warn",
		"--sqlite-pragma", "journal_mode=wal",
		"--sqlite-pragma", "synchronous=normal",
		// Deleting a just-closed workflow waits until the transfer queue's ack level
		// passes its close task; the default 30s update interval makes `dlc job delete`
		// (and `dlc run` replacing a finished job) wait that long on the dev server.
		"--dynamic-config-value", `history.transferProcessorUpdateAckInterval="1s"`,
		// Eager activities: an activity a workflow task schedules on the worker's own
		// task queue starts in the same round trip instead of going through matching
		// (temporalServerDynamicConfig says why).
		"--dynamic-config-value", "system.enableActivityEagerExecution=true",
	}
	if opts.Namespace != DefaultNamespace { // "default" always exists
		args = append(args, "--namespace", opts.Namespace)
	}
	for _, name := range slices.Sorted(maps.Keys(SearchAttributes)) {
		args = append(args, "--search-attribute", name+"="+SearchAttributes[name].String())
	}
	t := &Temporal{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Namespace: opts.Namespace}
	if opts.UI {
		uiPort, err := portOr(opts.UIPort)
		if err != nil {
			return nil, err
		}
		args = append(args, "--ui-port", strconv.Itoa(uiPort))
		t.UIAddress = net.JoinHostPort("127.0.0.1", strconv.Itoa(uiPort))
	} else {
		args = append(args, "--headless")
	}

	t.proc, err = startPrivate("temporal", bin, args, filepath.Join(dir, "temporal.log"), childEnv("TEMPORAL_"))
	if err != nil {
		return nil, err
	}
	if err := t.proc.Poll(ctx, t.ready); err != nil {
		return t, errors.Join(err, t.Close())
	}
	return t, nil
}

// ready checks, through the public API, everything a caller relies on: the
// frontend answers, the namespace exists, the search attributes are
// registered (added here when a database from an older version lacks one),
// and the Web UI serves.
func (t *Temporal) ready(ctx context.Context) error {
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  t.Address,
		Namespace: t.Namespace,
		Logger:    sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return err
	}
	if _, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: t.Namespace}); err != nil {
		return err
	}
	if err := ensureSearchAttributes(ctx, c, t.Namespace); err != nil {
		return err
	}
	if t.UIAddress != "" {
		if err := ProbeHTTP(ctx, "http://"+t.UIAddress+"/"); err != nil {
			return fmt.Errorf("web UI: %w", err)
		}
	}
	return nil
}

// CreateNamespace registers namespace (if it does not exist yet) with the
// custom search attributes, and waits until it accepts calls, so that each
// test can work in a namespace of its own.
func (t *Temporal) CreateNamespace(ctx context.Context, namespace string) error {
	return registerNamespace(ctx, t.Address, t.tlsConfig, namespace, 24*time.Hour)
}

// registerNamespace registers namespace on the frontend at address (if it does not
// exist yet) with retention and the custom search attributes, and waits until it
// answers.
func registerNamespace(ctx context.Context, address string, tlsConfig *tls.Config, namespace string, retention time.Duration) error {
	c, err := dialTemporal(ctx, address, tlsConfig, namespace)
	if err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace:                        namespace,
		WorkflowExecutionRetentionPeriod: durationpb.New(retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("devstack: register namespace %s: %w", namespace, err)
	}
	// The frontend learns of a new namespace on its next cache refresh.
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		_, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: namespace})
		if err == nil {
			err = ensureSearchAttributes(ctx, c, namespace)
		}
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: namespace %s not usable: %w (last error: %w)", namespace, ctx.Err(), err)
		case <-ticker.C:
		}
	}
}

// ensureSearchAttributes adds any of SearchAttributes the namespace lacks.
// The dev server registers them only when it creates a namespace, so a
// database made before an attribute was added to the list would miss it.
func ensureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return err
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range SearchAttributes {
		got, ok := have.GetCustomAttributes()[name]
		if !ok {
			missing[name] = typ
		} else if got != typ {
			return fmt.Errorf("devstack: search attribute %s is %s in namespace %s, want %s", name, got, namespace, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        namespace,
		SearchAttributes: missing,
	})
	if _, ok := errors.AsType[*serviceerror.AlreadyExists](err); ok {
		return nil
	}
	return err
}

// Close stops the server (SIGTERM, then SIGKILL after 5s). The database
// stays in Dir for the next StartTemporal.
func (t *Temporal) Close() error {
	if t == nil || t.proc == nil {
		return nil
	}
	return t.proc.Stop()
}
