package notify

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/smtp"
	"strconv"
	"strings"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// subjectPrefix starts the subject of every notification e-mail.
const subjectPrefix = "[OpenDLC] "

// sendMail sends the event to the rule's e-mail recipients: one message, to and cc,
// through the rule's SMTP server. The server's address is checked as a webhook's is
// (the allow-list guard).
func (d *Dispatcher) sendMail(t *task, r *schemas.NotificationRule) error {
	e := r.Spec.Email
	s := e.SMTP
	var password []byte
	if s.PasswordRef != nil {
		var err error
		if password, err = d.secret(t.ev.workspace, "passwordRef", "", s.PasswordRef); err != nil {
			return err
		}
	}
	from, err := mail.ParseAddress(e.From)
	if err != nil {
		return fmt.Errorf("from: %w", err)
	}
	var rcpts []string
	for _, a := range append(append([]string(nil), e.To...), e.Cc...) {
		p, err := mail.ParseAddress(a)
		if err != nil {
			return fmt.Errorf("recipient %q: %w", a, err)
		}
		rcpts = append(rcpts, p.Address)
	}
	msg, err := composeMail(e, message(t.ev, d.o.ConsoleURL), t.ev.workspace, t.rule, time.Now())
	if err != nil {
		return err
	}

	timeout := s.Timeout.D()
	if timeout <= 0 {
		timeout = schemas.DefaultSMTPTimeout.D()
	}
	ctx, cancel := context.WithTimeout(d.ctx, timeout)
	defer cancel()
	port := s.Port
	if port == 0 {
		port = 587
		if s.TLS == schemas.SMTPImplicit {
			port = 465
		}
	}
	conn, err := guardedDialContext(d.o.WebhookAllow)(ctx, "tcp", net.JoinHostPort(s.Host, strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) }) // Close of the dispatcher
	defer stop()

	tlsConfig := &tls.Config{ServerName: s.Host, RootCAs: d.o.SMTPRootCAs, MinVersion: tls.VersionTLS12}
	if s.TLS == schemas.SMTPImplicit {
		conn = tls.Client(conn, tlsConfig)
	}
	c, err := smtp.NewClient(conn, s.Host)
	if err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	defer c.Close()
	if err := c.Hello("opendlc"); err != nil {
		return fmt.Errorf("smtp: %w", err)
	}
	if s.TLS == "" || s.TLS == schemas.SMTPStartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("smtp: the server does not offer STARTTLS, which the rule requires")
		}
		if err := c.StartTLS(tlsConfig); err != nil {
			return fmt.Errorf("smtp: STARTTLS: %w", err)
		}
	}
	if s.Username != "" {
		// PlainAuth refuses to send the password over a connection without TLS.
		if err := c.Auth(smtp.PlainAuth("", s.Username, string(password), s.Host)); err != nil {
			return fmt.Errorf("smtp: AUTH: %w", err)
		}
	}
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("smtp: MAIL FROM: %w", err)
	}
	for _, a := range rcpts {
		if err := c.Rcpt(a); err != nil {
			return fmt.Errorf("smtp: RCPT TO %s: %w", a, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	if _, err := w.Write(msg); err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("smtp: DATA: %w", err)
	}
	_ = c.Quit() // the message is accepted; a failed QUIT changes nothing
	return nil
}

// composeMail writes the message: the event's title as subject, its text as a
// quoted-printable UTF-8 plain-text body, and a Message-ID derived from the workspace,
// rule and event, so that every attempt of one delivery carries the same id.
func composeMail(e *schemas.EmailTarget, m *schemas.NotificationMessage, ws, rule string, now time.Time) ([]byte, error) {
	list := func(addrs []string) (string, error) {
		out := make([]string, 0, len(addrs))
		for _, a := range addrs {
			p, err := mail.ParseAddress(a)
			if err != nil {
				return "", fmt.Errorf("address %q: %w", a, err)
			}
			out = append(out, p.String())
		}
		return strings.Join(out, ", "), nil
	}
	from, err := list([]string{e.From})
	if err != nil {
		return nil, err
	}
	to, err := list(e.To)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	header := func(k, v string) { b.WriteString(k + ": " + v + "\r\n") }
	header("From", from)
	header("To", to)
	if len(e.Cc) > 0 {
		cc, err := list(e.Cc)
		if err != nil {
			return nil, err
		}
		header("Cc", cc)
	}
	header("Subject", mime.QEncoding.Encode("utf-8", subjectPrefix+m.Title))
	header("Date", now.Format(time.RFC1123Z))
	sum := sha256.Sum256([]byte(ws + "/" + rule + "/" + m.ID))
	header("Message-ID", "<"+hex.EncodeToString(sum[:16])+"@opendlc>")
	header("MIME-Version", "1.0")
	header("Content-Type", "text/plain; charset=utf-8")
	header("Content-Transfer-Encoding", "quoted-printable")
	header(HeaderEventID, oneLine(m.ID))
	header(HeaderRule, ws+"/"+rule)
	b.WriteString("\r\n")
	qp := quotedprintable.NewWriter(&b)
	if _, err := qp.Write([]byte(strings.ReplaceAll(m.Text, "\n", "\r\n"))); err != nil {
		return nil, err
	}
	if err := qp.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
