package devstack

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/nats-io/nats.go"
)

// A Secure server refuses anonymous and wrong-password clients, admits the stack's
// identities with the passwords it generated into users.json (0600), and keeps them
// across a restart; the S3 gateway's identity may only publish bucket notifications.
func TestSecureNATSUsersAndRestart(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	dir := t.TempDir()
	n, err := StartNATS(ctx, NATSOptions{Dir: dir, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if nc, err := nats.Connect(n.URL); err == nil {
		nc.Close()
		t.Fatal("an anonymous client connected")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("anonymous client: %v, want an authorization violation", err)
	}
	if nc, err := nats.Connect(n.URL, nats.UserInfo(NATSUserServer, "wrong")); err == nil {
		nc.Close()
		t.Fatal("a wrong password connected")
	}
	fi, err := os.Stat(filepath.Join(dir, NATSUsersFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", NATSUsersFile, fi.Mode().Perm())
	}
	pw := map[string]string{}
	for _, u := range []string{NATSUserServer, NATSUserWorker, NATSUserS3} {
		pw[u] = n.Password(u)
		if len(pw[u]) < 32 {
			t.Fatalf("%s's password %q is short", u, pw[u])
		}
	}
	if pw[NATSUserServer] == pw[NATSUserWorker] {
		t.Error("the server and the worker share a password")
	}
	server, err := nats.Connect(n.URL, n.ClientOptions(NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := server.SubscribeSync("dlc.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := server.Flush(); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	s3user, err := nats.Connect(n.URL, append(n.ClientOptions(NATSUserS3),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"dlc.vision.job.j.status", "dlc.vision.s3.events"} {
		if err := s3user.Publish(subj, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s3user.Flush(); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil || m.Subject != "dlc.vision.s3.events" {
		t.Fatalf("first message the server saw: %v, %v; want dlc.vision.s3.events only", m, err)
	}
	select {
	case err := <-errs:
		if !strings.Contains(err.Error(), "dlc.vision.job.j.status") {
			t.Errorf("S3 user's violation: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("no permissions violation for the S3 user's job status publish")
	}
	s3user.Close()
	server.Close()

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2, err := StartNATS(ctx, NATSOptions{Dir: dir, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	for u, p := range pw {
		if n2.Password(u) != p {
			t.Errorf("%s's password changed across the restart", u)
		}
	}
	nc, err := nats.Connect(n2.URL, nats.UserInfo(NATSUserWorker, pw[NATSUserWorker]))
	if err != nil {
		t.Fatalf("the worker's password of before the restart: %v", err)
	}
	nc.Close()
}

// An authenticator admits the names it knows with the permissions it grants, until
// the grant's deadline; it is asked nothing for the stack's identities.
func TestNATSAuthenticatorGrants(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, time.Minute)
	n, err := StartNATS(ctx, NATSOptions{Dir: t.TempDir(), Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if nc, err := nats.Connect(n.URL, nats.UserInfo("b", "token")); err == nil {
		nc.Close()
		t.Fatal("a reader connected before any authenticator was set")
	}
	deadline := time.Now().Add(2 * time.Second)
	n.SetAuthenticator(func(_ context.Context, user, password string) (NATSGrant, error) {
		if user != "b" || password != "token" {
			return NATSGrant{}, errors.New("unknown")
		}
		return NATSGrant{Publish: []string{"dlc.b.trigger.*"}, Subscribe: []string{"dlc.b.>"}, Deadline: deadline}, nil
	})
	if nc, err := nats.Connect(n.URL, nats.UserInfo("b", "wrong")); err == nil {
		nc.Close()
		t.Fatal("a wrong token connected")
	}
	closed := make(chan struct{})
	nc, err := nats.Connect(n.URL, nats.UserInfo("b", "token"), nats.NoReconnect(),
		nats.ClosedHandler(func(*nats.Conn) { close(closed) }), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.SubscribeSync("dlc.b.job.j.status"); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
		if time.Now().Before(deadline) {
			t.Error("the connection closed before its deadline")
		}
	case <-time.After(15 * time.Second):
		t.Error("the connection outlived its deadline")
	}
}

// With TLS, the stack's clients connect over TLS trusting the generated CA, which is
// kept across a restart; a client that does not trust it is refused; the S3 gateway
// publishes its notifications over TLS with its own identity.
func TestNATSOverTLSWithS3Events(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 2*time.Minute)
	dir := t.TempDir()
	n, err := StartNATS(ctx, NATSOptions{Dir: dir + "/nats", Secure: true, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !strings.HasPrefix(n.URL, "tls://") || n.CAFile == "" {
		t.Fatalf("URL %s, CA %q: want tls:// and a CA file", n.URL, n.CAFile)
	}
	if nc, err := nats.Connect(n.URL, nats.UserInfo(NATSUserServer, n.Password(NATSUserServer))); err == nil {
		nc.Close()
		t.Fatal("a client that does not trust the CA connected")
	}
	nc, err := nats.Connect(n.URL, n.ClientOptions(NATSUserServer)...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.TLSConnectionState(); err != nil {
		t.Fatalf("not a TLS connection: %v", err)
	}
	msgs := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("dlc.vision.s3.events", msgs); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	srv, err := StartS3(ctx, S3Options{Dir: dir + "/s3", NATSURL: n.URLFor(NATSUserS3), NATSCAFile: n.CAFile,
		EventSubject: "dlc.vision.s3.events", Buckets: []string{"datasets"}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if _, err := srv.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("datasets"), Key: aws.String("x/part-1.json"),
		Body: bytes.NewReader([]byte("{}"))}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for found := false; !found; {
		select {
		case m := <-msgs:
			found = bytes.Contains(m.Data, []byte("x/part-1.json"))
		case <-deadline:
			t.Fatal("no bucket notification over TLS")
		}
	}

	ca, err := os.ReadFile(n.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	srv.Close()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2, err := StartNATS(ctx, NATSOptions{Dir: dir + "/nats", Secure: true, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	ca2, err := os.ReadFile(n2.CAFile)
	if err != nil || !bytes.Equal(ca, ca2) {
		t.Fatalf("the CA changed across the restart (%v)", err)
	}
	nc2, err := nats.Connect(n2.URL, n2.ClientOptions(NATSUserWorker)...)
	if err != nil {
		t.Fatal(err)
	}
	nc2.Close()
}
