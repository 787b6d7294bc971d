package devstack

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// The stack's own NATS identities (NATSOptions.Secure). Their names hold underscores,
// which workspace names (DNS labels) never do, so no workspace reader can take one.
const (
	// NATSUserServer is the API server's identity (with the dispatchers in its process).
	NATSUserServer = "_dlc_server"
	// NATSUserWorker is the worker's identity.
	NATSUserWorker = "_dlc_worker"
	// NATSUserS3 is the S3 gateway's identity: it may only publish bucket notifications.
	NATSUserS3 = "_dlc_s3"
)

// NATSUsersFile is the file in NATSOptions.Dir that keeps the generated passwords of
// the stack's identities, mode 0600.
const NATSUsersFile = "users.json"

// natsAuthTimeout bounds one NATSAuthenticator call.
const natsAuthTimeout = 5 * time.Second

// NATSGrant is what a NATSAuthenticator grants a connection: the subjects it may
// publish and subscribe to (nats-server allow lists; never nil: nil would allow
// everything), the subjects it may not subscribe to or receive within those
// (SubscribeDeny), and when the connection must end (zero: never).
type NATSGrant struct {
	Publish, Subscribe []string
	SubscribeDeny      []string
	Deadline           time.Time
}

// NATSAuthenticator admits a connection that is none of the configured users: it
// returns the grant of user with password, or an error to refuse it.
type NATSAuthenticator func(ctx context.Context, user, password string) (NATSGrant, error)

// natsAuth is the server's CustomClientAuthentication: the configured users and the
// stack's identities by password (compared in constant time), then the
// NATSAuthenticator, if one is set, for every other name.
type natsAuth struct {
	users  map[string]NATSUser
	extra  atomic.Pointer[NATSAuthenticator]
	logger *natsLogger
}

// Check implements server.Authentication.
func (a *natsAuth) Check(c server.ClientAuthentication) bool {
	if c.Kind() != server.CLIENT {
		return false
	}
	o := c.GetOpts()
	if u, ok := a.users[o.Username]; ok {
		if subtle.ConstantTimeCompare([]byte(o.Password), []byte(u.Password)) != 1 {
			return false
		}
		perms := permissionsOf(u.Publish, u.Subscribe)
		if perms != nil {
			perms.Subscribe.Deny = u.SubscribeDeny
		}
		c.RegisterUser(&server.User{Username: u.Name, Permissions: perms})
		return true
	}
	f := a.extra.Load()
	if f == nil || o.Username == "" || o.Password == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), natsAuthTimeout)
	defer cancel()
	g, err := (*f)(ctx, o.Username, o.Password)
	if err != nil {
		a.logger.Warnf("refused NATS user %q from %s: %v", o.Username, c.RemoteAddress(), err)
		return false
	}
	if g.Publish == nil || g.Subscribe == nil {
		a.logger.Errorf("refused NATS user %q: a grant without allow lists", o.Username)
		return false
	}
	perms := permissionsOf(g.Publish, g.Subscribe)
	perms.Subscribe.Deny = g.SubscribeDeny
	c.RegisterUser(&server.User{Username: o.Username, Permissions: perms, ConnectionDeadline: g.Deadline})
	return true
}

// permissionsOf is nats-server's form of allow lists; nil for both allows everything.
func permissionsOf(publish, subscribe []string) *server.Permissions {
	if publish == nil && subscribe == nil {
		return nil
	}
	return &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: publish},
		Subscribe: &server.SubjectPermission{Allow: subscribe},
	}
}

// SetAuthenticator installs f for the names that are no configured user, such as
// workspace readers; nil refuses them again. Without Secure or Users the server admits
// everyone and f is never asked.
func (n *NATS) SetAuthenticator(f NATSAuthenticator) {
	if n.auth == nil {
		return
	}
	if f == nil {
		n.auth.extra.Store(nil)
		return
	}
	n.auth.extra.Store(&f)
}

// Password is the password of one of the stack's identities (NATSUserServer...), ""
// without NATSOptions.Secure.
func (n *NATS) Password(user string) string { return n.passwords[user] }

// ClientOptions are the connection options of one of the stack's identities: its
// user and password (with NATSOptions.Secure) and trust in the generated CA (with
// NATSOptions.TLS).
func (n *NATS) ClientOptions(user string) []nats.Option {
	var opts []nats.Option
	if pw := n.passwords[user]; pw != "" {
		opts = append(opts, nats.UserInfo(user, pw))
	}
	if n.CAFile != "" {
		opts = append(opts, nats.RootCAs(n.CAFile))
	}
	return opts
}

// URLFor is URL with the user and password of one of the stack's identities in it,
// for programs that take credentials only in the URL (the S3 gateway). Never print it.
func (n *NATS) URLFor(user string) string {
	pw := n.passwords[user]
	if pw == "" {
		return n.URL
	}
	u, err := url.Parse(n.URL)
	if err != nil {
		return n.URL
	}
	u.User = url.UserPassword(user, pw)
	return u.String()
}

// stackUsers are the stack's identities with their permissions: the server and the
// worker may do everything; the S3 gateway may only publish bucket notifications.
func stackUsers(passwords map[string]string) []NATSUser {
	return []NATSUser{
		{Name: NATSUserServer, Password: passwords[NATSUserServer]},
		{Name: NATSUserWorker, Password: passwords[NATSUserWorker]},
		{Name: NATSUserS3, Password: passwords[NATSUserS3],
			// _dlc.s3.events: schemas.S3RawEventSubject, which the stack routes to the
			// owning workspace.
			Publish: []string{"dlc.*.s3.events", DefaultEventSubject, "_dlc.s3.events"}, Subscribe: []string{"_INBOX_dlc_s3.>"}},
	}
}

// natsUsersFile is NATSUsersFile's content.
type natsUsersFile struct {
	Passwords map[string]string `json:"passwords"`
}

var stackUserRE = regexp.MustCompile(`^_dlc_[a-z0-9]+$`)

// loadPasswords reads the stack's identities' passwords from path, generating (and
// writing, mode 0600) those missing, so they stay the same across restarts.
func loadPasswords(path string) (map[string]string, error) {
	var f natsUsersFile
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("devstack: nats users: %w", err)
	default:
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("devstack: nats users %s: %w", path, err)
		}
	}
	if f.Passwords == nil {
		f.Passwords = map[string]string{}
	}
	changed := false
	for _, name := range []string{NATSUserServer, NATSUserWorker, NATSUserS3} {
		if len(f.Passwords[name]) >= 32 && stackUserRE.MatchString(name) {
			continue
		}
		secret := make([]byte, 24)
		if _, err := rand.Read(secret); err != nil {
			return nil, fmt.Errorf("devstack: nats users: %w", err)
		}
		f.Passwords[name] = hex.EncodeToString(secret)
		changed = true
	}
	if changed {
		if b, err = json.MarshalIndent(f, "", "  "); err != nil {
			return nil, err
		}
		if err := writePrivate(path, b); err != nil {
			return nil, fmt.Errorf("devstack: nats users: %w", err)
		}
	}
	// A file copied in with looser modes is narrowed again.
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("devstack: nats users: %w", err)
	}
	return f.Passwords, nil
}

// writePrivate writes b to path (mode 0600) through a temporary file and a rename, so
// a crash never leaves half a file.
func writePrivate(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
