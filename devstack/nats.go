package devstack

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/opendlc/opendlc/internal/proc"
)

// natsReadyTimeout bounds how long StartNATS waits for the server.
const natsReadyTimeout = 10 * time.Second

// NATSOptions configures StartNATS.
type NATSOptions struct {
	// Dir is the JetStream file store directory; nats.log goes here too.
	Dir string
	// Port is the client port; 0 lets the server pick a free one.
	Port int
	// Users, when set, turn on authentication: only these users may connect, each with
	// its own permissions (nil: everything).
	Users []NATSUser
	// Secure turns on authentication with the stack's own identities too
	// (NATSUserServer, NATSUserWorker, NATSUserS3), whose passwords are generated into
	// Dir/users.json (mode 0600) on first start and read from there afterwards. Other
	// names are asked of the NATSAuthenticator (SetAuthenticator); without one they are
	// refused, and so is every anonymous connection.
	Secure bool
	// TLS serves NATS over TLS only, with a server certificate for loopback signed by a
	// CA generated into Dir/tls on first start (NATS.CAFile).
	TLS bool
	// ServerName names the server; JetStream keys its state by it, so it must stay the
	// same across restarts on Dir, and differ between the servers of a cluster. Default
	// "opendlc-dev".
	ServerName string
	// Cluster, when set, makes the server one of a cluster (StartNATSCluster).
	Cluster *NATSRoutes
}

// NATSRoutes is a server's place in a NATS cluster: the cluster's name, the port it
// listens on for the other servers (on 127.0.0.1), and their route URLs.
type NATSRoutes struct {
	Name   string
	Port   int
	Routes []string
}

// NATSUser is a user of the embedded server.
type NATSUser struct {
	Name, Password string
	// Publish and Subscribe list the allowed subjects; both nil allow everything.
	Publish, Subscribe []string
	// SubscribeDeny lists subjects never delivered to the user, even within Subscribe.
	SubscribeDeny []string
}

// NATS is an embedded NATS server with JetStream enabled.
type NATS struct {
	// URL is the client URL, nats://127.0.0.1:port.
	URL string
	// Server is the embedded server, for tests that need to reach inside.
	Server *server.Server
	// CAFile is the CA that clients trust with NATSOptions.TLS; "" without.
	CAFile string

	auth      *natsAuth
	passwords map[string]string

	log       *os.File
	closeOnce sync.Once
	closeErr  error
}

// StartNATS starts an embedded NATS server with JetStream storing to Dir, so
// that streams and their messages survive a restart on the same Dir.
func StartNATS(ctx context.Context, opts NATSOptions) (*NATS, error) {
	dir, err := mkdir(opts.Dir)
	if err != nil {
		return nil, err
	}
	port := opts.Port
	if port == 0 {
		port = server.RANDOM_PORT // the server binds :0 itself, so no race for the port
	}
	sopts := &server.Options{
		ServerName: cmp.Or(opts.ServerName, "opendlc-dev"), // JetStream keys its state by server name: keep it stable
		Host:       "127.0.0.1",
		Port:       port,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
	}
	if c := opts.Cluster; c != nil {
		sopts.Cluster = server.ClusterOpts{Name: c.Name, Host: "127.0.0.1", Port: c.Port}
		sopts.Routes = server.RoutesFromStr(strings.Join(c.Routes, ","))
	}
	logPath := filepath.Join(dir, "nats.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err == nil {
		err = logFile.Chmod(0o600) // an earlier version's log was 0644
	}
	if err != nil {
		return nil, fmt.Errorf("devstack: nats log: %w", err)
	}
	// The stack's passwords never reach the log, whatever the server says.
	redactor := proc.NewRedactor(logFile)
	logger := &natsLogger{Logger: log.New(redactor, "", log.LstdFlags|log.Lmicroseconds), fatal: make(chan string, 1)}
	n := &NATS{log: logFile}
	if err := n.configure(sopts, dir, opts, logger); err != nil {
		logFile.Close()
		return nil, err
	}
	if n.auth != nil {
		for _, u := range n.auth.users {
			redactor.Add(u.Password)
		}
	}
	s, err := server.NewServer(sopts)
	if err != nil {
		logFile.Close()
		return nil, fmt.Errorf("devstack: nats: %w", err)
	}
	s.SetLoggerV2(logger, false, false, false)
	n.Server = s

	s.Start()
	ctx, cancel := context.WithTimeout(ctx, natsReadyTimeout)
	defer cancel()
	for !s.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-logger.fatal:
			n.Close()
			return nil, fmt.Errorf("devstack: nats: %s", msg)
		case <-ctx.Done():
			n.Close()
			return nil, fmt.Errorf("devstack: nats not ready: %w; see %s", ctx.Err(), logPath)
		default:
		}
	}
	if !s.JetStreamEnabled() {
		n.Close()
		return nil, fmt.Errorf("devstack: nats started without JetStream; see %s", logPath)
	}
	n.URL = s.ClientURL()
	return n, nil
}

// configure adds authentication (Users, Secure) and TLS to sopts.
func (n *NATS) configure(sopts *server.Options, dir string, opts NATSOptions, logger *natsLogger) error {
	users := opts.Users
	if opts.Secure {
		pw, err := loadPasswords(filepath.Join(dir, NATSUsersFile))
		if err != nil {
			return err
		}
		n.passwords = pw
		users = append(stackUsers(pw), users...)
	}
	if len(users) > 0 || opts.Secure {
		n.auth = &natsAuth{users: map[string]NATSUser{}, logger: logger}
		for _, u := range users {
			n.auth.users[u.Name] = u
		}
		sopts.CustomClientAuthentication = n.auth
	}
	if opts.TLS {
		cfg, ca, err := natsTLS(filepath.Join(dir, "tls"))
		if err != nil {
			return err
		}
		sopts.TLSConfig, sopts.TLS, sopts.TLSTimeout, n.CAFile = cfg, true, 5, ca
	}
	return nil
}

// Close shuts the server down, flushing JetStream to Dir.
func (n *NATS) Close() error {
	if n == nil || n.Server == nil {
		return nil
	}
	n.closeOnce.Do(func() {
		n.Server.Shutdown()
		n.Server.WaitForShutdown()
		n.closeErr = n.log.Close()
	})
	return n.closeErr
}

// natsLogger writes the embedded server's log to a file. Unlike the
// server's own loggers, Fatalf does not exit: a fatal server error (a port
// in use, an unusable store dir) must not end the process that embeds it.
type natsLogger struct {
	*log.Logger
	fatal chan string // receives the first fatal error
}

func (l *natsLogger) Noticef(format string, v ...any) { l.Printf("[INF] "+format, v...) }
func (l *natsLogger) Warnf(format string, v ...any)   { l.Printf("[WRN] "+format, v...) }
func (l *natsLogger) Errorf(format string, v ...any)  { l.Printf("[ERR] "+format, v...) }
func (l *natsLogger) Debugf(string, ...any)           {}
func (l *natsLogger) Tracef(string, ...any)           {}

func (l *natsLogger) Fatalf(format string, v ...any) {
	l.Printf("[FTL] "+format, v...)
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}
