package notify_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/internal/testcert"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// smtpUser and smtpPassword are what the test SMTP server accepts.
const (
	smtpUser     = "dlc-notify"
	smtpPassword = "smtp password held in a secret"
)

// received is one message the SMTP server accepted.
type received struct {
	from     string
	rcpts    []string
	data     []byte
	tls      bool
	authUser string
}

// smtpServer is a real SMTP server (github.com/emersion/go-smtp) on 127.0.0.1 that
// offers STARTTLS with a test certificate and AUTH PLAIN, and refuses mail from a
// session that has not authenticated.
type smtpServer struct {
	host, port string
	roots      *x509.CertPool
	mu         sync.Mutex
	msgs       []received
}

func newSMTPServer(t *testing.T) *smtpServer { return startSMTPServer(t, true) }

// startSMTPServer starts the server, offering STARTTLS only when withTLS.
func startSMTPServer(t *testing.T, withTLS bool) *smtpServer {
	return startSMTPServerOn(t, withTLS, false)
}

// startSMTPServerOn starts the server; with implicit, it speaks TLS from the first
// byte (as on port 465).
func startSMTPServerOn(t *testing.T, withTLS, implicit bool) *smtpServer {
	t.Helper()
	certFile, keyFile := testcert.Write(t, t.TempDir(), "127.0.0.1")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)

	s := &smtpServer{roots: roots}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c}, nil
	}))
	srv.Domain = "127.0.0.1"
	if withTLS {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	} else {
		srv.AllowInsecureAuth = true
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.host, s.port, _ = net.SplitHostPort(l.Addr().String())
	if implicit {
		l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *smtpServer) messages() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.msgs...)
}

type smtpSession struct {
	srv  *smtpServer
	conn *smtp.Conn
	user string
	msg  received
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, username, password string) error {
		if username != smtpUser || password != smtpPassword {
			return errors.New("invalid username or password")
		}
		s.user = username
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.user == "" {
		return smtp.ErrAuthRequired
	}
	s.msg = received{from: from, authUser: s.user}
	_, s.msg.tls = s.conn.TLSConnectionState()
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.msg.rcpts = append(s.msg.rcpts, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.msg.data = b
	s.srv.mu.Lock()
	s.srv.msgs = append(s.srv.msgs, s.msg)
	s.srv.mu.Unlock()
	return nil
}

func (s *smtpSession) Reset()        {}
func (s *smtpSession) Logout() error { return nil }

// emailRule returns a rule of ws that mails every Failed phase event through srv.
func emailRule(ws, name string, srv *smtpServer, mutate ...func(*schemas.NotificationRule)) *schemas.NotificationRule {
	port, _ := strconv.Atoi(srv.port)
	r := webhookRule(ws, name, "", func(r *schemas.NotificationRule) {
		r.Spec.Webhook = nil
		r.Spec.Match.Phases = []schemas.JobPhase{schemas.JobFailed}
		r.Spec.Email = &schemas.EmailTarget{
			To: []string{"Oncall <oncall@example.com>"}, Cc: []string{"team@example.com"}, From: "OpenDLC <dlc@example.com>",
			SMTP: schemas.SMTPServer{Host: srv.host, Port: int32(port), Username: smtpUser, PasswordRef: &schemas.SecretRef{Name: "smtp"}},
		}
	})
	for _, m := range mutate {
		m(r)
	}
	return r
}

// TestEmailOverSMTP: a rule's e-mail target sends one message per matched event to a
// real SMTP server, after STARTTLS and AUTH PLAIN with the password from a secret, to
// every recipient, with the event's title as subject and its human-readable message
// as body.
func TestEmailOverSMTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := newSMTPServer(t)
	d := e.start(notify.WithSMTPRootCAs(srv.roots), notify.WithConsoleURL("https://dlc.example.com"),
		notify.WithSecrets(notify.StaticSecrets{"a/smtp": []byte(smtpPassword)}))
	e.put(d, emailRule("a", "mail", srv))
	e.phase("a", "resnet", 1, schemas.JobRunning, nil) // not matched
	p := e.failed("a", "resnet", 2)
	testutil.Eventually(t, notifyWait, "one e-mail", func() bool { return len(srv.messages()) == 1 })
	e.waitProcessed("a")

	m := srv.messages()[0]
	wantEqual(t, "envelope", []any{"dlc@example.com", []string{"oncall@example.com", "team@example.com"}, true, smtpUser},
		[]any{m.from, m.rcpts, m.tls, m.authUser})
	msg, err := mail.ReadMessage(strings.NewReader(string(m.data)))
	if err != nil {
		t.Fatal(err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "headers", map[string]string{
		"Subject": "[OpenDLC] Job resnet Failed: Hang", "From": `"OpenDLC" <dlc@example.com>`,
		"To": `"Oncall" <oncall@example.com>`, "Cc": "<team@example.com>",
		"Content-Type": "text/plain; charset=utf-8", "X-OpenDLC-Event-Id": p.id, "X-OpenDLC-Rule": "a/mail",
	}, map[string]string{
		"Subject": subject, "From": msg.Header.Get("From"), "To": msg.Header.Get("To"), "Cc": msg.Header.Get("Cc"),
		"Content-Type": msg.Header.Get("Content-Type"), "X-OpenDLC-Event-Id": msg.Header.Get("X-OpenDLC-Event-Id"),
		"X-OpenDLC-Rule": msg.Header.Get("X-OpenDLC-Rule"),
	})
	if _, err := msg.Header.Date(); err != nil {
		t.Errorf("Date header: %v", err)
	}
	if id := msg.Header.Get("Message-ID"); !strings.HasSuffix(id, "@opendlc>") {
		t.Errorf("Message-ID %q", id)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	if err != nil {
		t.Fatal(err)
	}
	wantContains(t, "body", strings.ReplaceAll(string(body), "\r\n", "\n"),
		"Job resnet Failed: Hang\n", "workspace: a\n", "job: resnet\n", "phase: Running -> Failed\n", "reason: Hang\n",
		"message: no progress for 10m <!channel>\n", "link: https://dlc.example.com/ui/ws/a/jobs/resnet\n")
}

// TestEmailGuardAndDeadLetter: an SMTP server on an address webhooks may not reach
// (loopback, here, without the allow-list) is refused; the delivery is dead-lettered
// with the reason, and the server never receives the message.
func TestEmailGuardAndDeadLetter(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := newSMTPServer(t)
	d, err := notify.StartDispatcher(e.ctx, e.js, notify.WithLogger(testLogger(t)), notify.WithSMTPRootCAs(srv.roots),
		notify.WithSecrets(notify.StaticSecrets{"a/smtp": []byte(smtpPassword)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close(t.Context()) })
	e.put(d, emailRule("a", "mail", srv, func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 2 }))
	p := e.failed("a", "resnet", 1)
	var letters []notify.DeadLetter
	testutil.Eventually(t, notifyWait, "a dead letter", func() bool {
		letters = nil
		for _, m := range e.notifyMsgs(schemas.DefaultDeadLetterSubject("a")) {
			var l notify.DeadLetter
			if err := json.Unmarshal(m.Data, &l); err != nil {
				t.Fatal(err)
			}
			letters = append(letters, l)
		}
		return len(letters) == 1
	})
	e.waitProcessed("a")
	l := letters[0]
	wantEqual(t, "dead letter", []any{"mail", "email", p.id, "Oncall <oncall@example.com>, team@example.com", 2},
		[]any{l.Rule, l.Target, l.EventID, l.Destination, l.Attempts})
	wantContains(t, "dead letter error", l.Error, "destination refused", "loopback")
	if n := len(srv.messages()); n != 0 {
		t.Errorf("the SMTP server received %d messages through a refused address", n)
	}
}

// TestEmailRequiresSTARTTLS: with the default tls policy, a server that does not offer
// STARTTLS never gets the password or the message: the delivery is dead-lettered.
func TestEmailRequiresSTARTTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := startSMTPServer(t, false)
	d := e.start(notify.WithSecrets(notify.StaticSecrets{"a/smtp": []byte(smtpPassword)}))
	e.put(d, emailRule("a", "mail", srv, func(r *schemas.NotificationRule) { r.Spec.Delivery.MaxAttempts = 1 }))
	e.failed("a", "resnet", 1)
	var letters []*jetstream.RawStreamMsg
	testutil.Eventually(t, notifyWait, "a dead letter", func() bool {
		letters = e.notifyMsgs(schemas.DefaultDeadLetterSubject("a"))
		return len(letters) == 1
	})
	var l notify.DeadLetter
	if err := json.Unmarshal(letters[0].Data, &l); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "dead letter error", "smtp: the server does not offer STARTTLS, which the rule requires", l.Error)
	if n := len(srv.messages()); n != 0 {
		t.Errorf("the SMTP server received %d messages without TLS", n)
	}
}

// TestEmailImplicitTLS: with tls: implicit the session is TLS from the first byte, the
// server's certificate verified, and the message delivered.
func TestEmailImplicitTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	srv := startSMTPServerOn(t, false, true)
	d := e.start(notify.WithSMTPRootCAs(srv.roots), notify.WithSecrets(notify.StaticSecrets{"a/smtp": []byte(smtpPassword)}))
	e.put(d, emailRule("a", "mail", srv, func(r *schemas.NotificationRule) { r.Spec.Email.SMTP.TLS = schemas.SMTPImplicit }))
	p := e.failed("a", "resnet", 1)
	testutil.Eventually(t, notifyWait, "one e-mail", func() bool { return len(srv.messages()) == 1 })
	e.waitProcessed("a")
	m := srv.messages()[0]
	msg, err := mail.ReadMessage(strings.NewReader(string(m.data)))
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "session and event", []any{true, smtpUser, p.id}, []any{m.tls, m.authUser, msg.Header.Get("X-OpenDLC-Event-Id")})
}
