package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// postgresReadyTimeout bounds how long StartPostgres waits for the server.
const postgresReadyTimeout = 60 * time.Second

// PostgresUser is the database superuser StartPostgres creates. It logs in without a
// password, from loopback only.
const PostgresUser = "postgres"

// postgresBinGlob is where Debian's postgresql package installs the server's programs,
// one directory per major version.
const postgresBinGlob = "/usr/lib/postgresql/*/bin"

// PostgresOptions configures StartPostgres.
type PostgresOptions struct {
	// Dir holds the database cluster (Dir/data), the server's socket and postgres.log.
	// When this process runs as root, the server runs as the postgres user, which must
	// be able to reach Dir: StartPostgres makes Dir its own, but every directory above
	// it must let others through (mode o+x).
	Dir string
	// Port is the TCP port on 127.0.0.1; 0 picks a free one.
	Port int
}

// Postgres is a running PostgreSQL server from the host's installation (Debian's
// postgresql package), its cluster made by initdb in a directory of its own. It is
// tuned for tests: fsync and synchronous commit are off, so a crash of the machine
// (not of the server) can lose the last transactions.
type Postgres struct {
	// Host and Port are where it listens: 127.0.0.1 and a TCP port.
	Host string
	Port int
	// User is the superuser, PostgresUser; it needs no password.
	User string
	// Dir is the state directory.
	Dir string

	bin  string
	proc *process
}

// Address is host:port.
func (p *Postgres) Address() string { return p.Host + ":" + strconv.Itoa(p.Port) }

// StartPostgres makes a database cluster in Dir/data on first start (initdb) and
// starts the server on it, returning once it accepts connections.
func StartPostgres(ctx context.Context, opts PostgresOptions) (*Postgres, error) {
	dir, err := mkdir(opts.Dir)
	if err != nil {
		return nil, err
	}
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	runAs, err := postgresRunAs(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := initdb(ctx, bin, data, runAs); err != nil {
			return nil, err
		}
	}
	port, err := portOr(opts.Port)
	if err != nil {
		return nil, err
	}
	p := &Postgres{Host: "127.0.0.1", Port: port, User: PostgresUser, Dir: dir, bin: bin}
	args := append(runAs, filepath.Join(bin, "postgres"),
		"-D", data,
		"-p", strconv.Itoa(port),
		"-k", dir, // the Unix socket, out of /var/run/postgresql
		"-c", "listen_addresses=127.0.0.1",
		"-c", "max_connections=200",
		// A test database: durability against a machine crash is not needed.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
	)
	p.proc, err = startProcess("postgres", args[0], args[1:], filepath.Join(dir, "postgres.log"), childEnv("PG"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, postgresReadyTimeout)
	defer cancel()
	if err := p.proc.Poll(ctx, p.ready); err != nil {
		return nil, errors.Join(err, p.Close())
	}
	return p, nil
}

// ready asks pg_isready whether the server accepts connections.
func (p *Postgres) ready(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "pg_isready"), "-h", p.Host, "-p", strconv.Itoa(p.Port), "-U", p.User, "-q")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pg_isready: %w", err)
	}
	return nil
}

// Close stops the server (SIGTERM: a fast shutdown). The cluster stays in Dir.
func (p *Postgres) Close() error {
	if p == nil || p.proc == nil {
		return nil
	}
	return p.proc.Stop()
}

// postgresBinDir is the newest installed version's bin directory.
func postgresBinDir() (string, error) {
	dirs, _ := filepath.Glob(postgresBinGlob)
	var found []string
	for _, d := range dirs {
		if isExecutable(filepath.Join(d, "postgres")) && isExecutable(filepath.Join(d, "initdb")) {
			found = append(found, d)
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("devstack: PostgreSQL not found (%s/postgres): install Debian's postgresql package (task deps)", postgresBinGlob)
	}
	// The directory names are major versions: the longest number is the newest.
	slices.SortFunc(found, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	return found[len(found)-1], nil
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// postgresRunAs is the command prefix that runs the server's programs: none for an
// ordinary user; as root, which PostgreSQL refuses to run as, setpriv to the postgres
// user (made by Debian's package), after making dir that user's.
func postgresRunAs(dir string) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("devstack: PostgreSQL refuses to run as root and there is no postgres user to run it as (%w): install Debian's postgresql package", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	err = filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return nil, fmt.Errorf("devstack: give %s to the postgres user: %w", dir, err)
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return nil, fmt.Errorf("devstack: running PostgreSQL as the postgres user needs setpriv (util-linux): %w", err)
	}
	return []string{setpriv, "--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups", "--"}, nil
}

// initdb makes a database cluster in data whose superuser PostgresUser logs in from
// loopback without a password.
func initdb(ctx context.Context, bin, data string, runAs []string) error {
	args := append(runAs, filepath.Join(bin, "initdb"),
		"-D", data, "-U", PostgresUser, "-E", "UTF8", "--locale=C",
		"--auth=trust", "--no-sync")
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Env = childEnv("PG", "LC_", "LANG")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("devstack: initdb %s: %w\n%s", data, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DSN is the URL of database name on the server, as the superuser (no password).
func (p *Postgres) DSN(name string) string {
	return "postgres://" + p.User + "@" + p.Address() + "/" + name + "?sslmode=disable"
}

// CreateDatabase creates database name unless it exists (createdb).
func (p *Postgres) CreateDatabase(ctx context.Context, name string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, "createdb"), "-h", p.Host, "-p", strconv.Itoa(p.Port), "-U", p.User, name)
	out, err := cmd.CombinedOutput()
	if err != nil && !strings.Contains(string(out), "already exists") {
		return fmt.Errorf("devstack: createdb %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return nil
}
