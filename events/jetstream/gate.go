package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Workspace readers never address the JetStream API ($JS.API.>) themselves: NATS
// permissions can check only the subject of a consumer-create request, never its body,
// so a reader allowed $JS.API.CONSUMER.CREATE could make durable consumers without
// bound, consumers named like the stack's own, and push consumers (or pull requests)
// that deliver into any subject, another workspace's included. Instead a reader uses
// the API prefix ReaderAPIPrefix(ws) (nats.go: jetstream.NewWithAPIPrefix), which its
// permissions allow for three requests only (consumer create filtered on its
// workspace, consumer info and next on the event and log streams), and the Gate, run
// by the stack's server identity, checks each request and forwards it to $JS.API with
// the reader's reply subject: JetStream answers the reader directly.

// ReaderAPIPrefix is the JetStream API prefix of a workspace's users.
func ReaderAPIPrefix(workspace string) string { return "$DLC.JS." + workspace + ".API" }

// readerAPISubjects is what the gate serves: every workspace's ReaderAPIPrefix.
const readerAPISubjects = "$DLC.JS.*.API.>"

// Bounds on workspace readers' consumers.
const (
	// MaxReaderConsumers is how many consumers a workspace's readers may hold on each
	// of the event and log streams at once.
	MaxReaderConsumers = 100
	// MaxReaderInactive is the longest a reader's consumer may live unused (nats.go's
	// ordered consumers ask for 5 minutes); 0 leaves JetStream's default for
	// ephemeral consumers, 5 seconds.
	MaxReaderInactive = 10 * time.Minute
	// ReservedConsumerPrefix starts the names of the stack's own consumers (the
	// notification dispatcher's dlc-notify-...): a reader's consumer may not.
	ReservedConsumerPrefix = "dlc-"
)

// Gate forwards workspace readers' JetStream API requests that their grant allows.
type Gate struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	sub *nats.Subscription
	max int
}

// StartGate serves ReaderAPIPrefix of every workspace on nc, a connection of the
// stack's server identity, until Close. Several gates share the requests (a queue
// group).
func StartGate(nc *nats.Conn, log *slog.Logger) (*Gate, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: gate: %w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	g := &Gate{nc: nc, js: js, log: log.With("component", "reader-gate"), max: MaxReaderConsumers}
	if g.sub, err = nc.QueueSubscribe(readerAPISubjects, "dlc-reader-gate", g.handle); err != nil {
		return nil, fmt.Errorf("jetstream: gate: %w", err)
	}
	if err := nc.Flush(); err != nil {
		return nil, fmt.Errorf("jetstream: gate: %w", err)
	}
	return g, nil
}

// Close stops serving.
func (g *Gate) Close() error {
	if err := g.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("jetstream: gate: %w", err)
	}
	return nil
}

// gateTimeout bounds the lookups one create request needs.
const gateTimeout = 5 * time.Second

func (g *Gate) handle(m *nats.Msg) {
	tokens := strings.Split(m.Subject, ".")
	if len(tokens) < 6 || ValidWorkspace(tokens[2]) != nil {
		return
	}
	ws, rest := tokens[2], tokens[4:]
	// Every answer, and a pull request's messages, go to the reply subject: only the
	// reader's own inbox.
	if !strings.HasPrefix(m.Reply, InboxPrefix(ws)+".") {
		g.log.Warn("reader request with a reply subject outside its inbox dropped", "workspace", ws, "subject", m.Subject, "reply", m.Reply)
		return
	}
	var stream string
	create := false
	switch {
	case len(rest) >= 6 && rest[0] == "CONSUMER" && rest[1] == "CREATE" && rest[4] == "dlc" && rest[5] == ws:
		stream, create = rest[2], true
	case len(rest) == 4 && rest[0] == "CONSUMER" && rest[1] == "INFO":
		stream = rest[2]
	case len(rest) == 5 && rest[0] == "CONSUMER" && rest[1] == "MSG" && rest[2] == "NEXT":
		stream = rest[3]
	}
	if stream != EventsStream && stream != LogsStream {
		g.refuse(m, "", fmt.Errorf("%s is not granted", m.Subject))
		return
	}
	data := m.Data
	if create {
		ctx, cancel := context.WithTimeout(context.Background(), gateTimeout)
		err := g.checkCreate(ctx, ws, stream, rest[3], m.Data)
		cancel()
		if err == nil {
			data, err = markReader(m.Data, ws)
		}
		if err != nil {
			g.log.Warn("reader consumer refused", "workspace", ws, "subject", m.Subject, "error", err)
			g.refuse(m, "consumer_create_response", err)
			return
		}
	}
	out := &nats.Msg{Subject: "$JS.API." + strings.Join(rest, "."), Reply: m.Reply, Header: m.Header, Data: data}
	if err := g.nc.PublishMsg(out); err != nil {
		g.log.Warn("reader request not forwarded", "workspace", ws, "subject", m.Subject, "error", err)
	}
}

// checkCreate refuses what a reader's consumer may not be: durable, named like the
// stack's, already existing (an update), delivering outside the reader's inbox, living
// unused longer than MaxReaderInactive, or one too many of the workspace's.
func (g *Gate) checkCreate(ctx context.Context, ws, stream, name string, body []byte) error {
	var req struct {
		Stream string                   `json:"stream_name"`
		Config jetstream.ConsumerConfig `json:"config"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("malformed request: %w", err)
	}
	c := req.Config
	switch {
	case req.Stream != stream:
		return errors.New("the request's stream is not the subject's")
	case c.Durable != "":
		return errors.New("durable consumers are not granted to workspace readers: create an ephemeral one")
	case c.Name != "" && c.Name != name:
		return errors.New("the consumer's name is not the subject's")
	case strings.HasPrefix(name, ReservedConsumerPrefix):
		return fmt.Errorf("consumer names starting with %q are the stack's", ReservedConsumerPrefix)
	case c.DeliverSubject != "" && !strings.HasPrefix(c.DeliverSubject, InboxPrefix(ws)+"."):
		return fmt.Errorf("a push consumer delivers only to the reader's inbox, %s.>", InboxPrefix(ws))
	case c.InactiveThreshold > MaxReaderInactive:
		return fmt.Errorf("inactive threshold %s: at most %s", c.InactiveThreshold, MaxReaderInactive)
	}
	s, err := g.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", stream, err)
	}
	if _, err := s.Consumer(ctx, name); err == nil {
		return fmt.Errorf("consumer %s exists", name)
	} else if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("consumer %s: %w", name, err)
	}
	n := 0
	infos := s.ListConsumers(ctx)
	for info := range infos.Info() {
		if info.Config.Metadata[ReaderMetadataKey] == ws {
			n++
		}
	}
	if err := infos.Err(); err != nil {
		return fmt.Errorf("consumers of %s: %w", stream, err)
	}
	if n >= g.max {
		return fmt.Errorf("workspace %s's readers hold %d consumers on %s, the most they may", ws, n, stream)
	}
	return nil
}

// ReaderMetadataKey is the consumer metadata entry the gate sets to the workspace of
// the reader that asked for the consumer: the consumers MaxReaderConsumers counts.
const ReaderMetadataKey = "opendlc-reader"

// markReader is a create request's body with the consumer's metadata entry
// ReaderMetadataKey set to ws, every other field as it was.
func markReader(body []byte, ws string) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("malformed request: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(req["config"], &cfg); err != nil {
		return nil, fmt.Errorf("malformed request: %w", err)
	}
	md := map[string]string{}
	if raw, ok := cfg["metadata"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &md); err != nil {
			return nil, fmt.Errorf("malformed metadata: %w", err)
		}
	}
	md[ReaderMetadataKey] = ws
	var err error
	if cfg["metadata"], err = json.Marshal(md); err != nil {
		return nil, err
	}
	if req["config"], err = json.Marshal(cfg); err != nil {
		return nil, err
	}
	return json.Marshal(req)
}

// refuse answers a request with a JetStream API error (code 403), which clients report
// as such.
func (g *Gate) refuse(m *nats.Msg, kind string, err error) {
	resp := map[string]any{"error": map[string]any{"code": 403, "err_code": 10999, "description": "opendlc: " + err.Error()}}
	if kind != "" {
		resp["type"] = "io.nats.jetstream.api.v1." + kind
	}
	b, _ := json.Marshal(resp)
	_ = m.Respond(b)
}
