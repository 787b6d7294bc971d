package notify

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// A workspace's durable consumer is named "<prefix>-<workspace>_<secret>": the secret
// is 26 random characters, so that no workspace reader can guess the name and read,
// pull from or delete the consumer (their NATS permissions allow consumer requests by
// name, for their own ephemeral consumers, and never a consumer list). The name
// itself is what keeps the secret: a restarted dispatcher finds its consumer by
// listing the stream's consumers, and resumes it, losing and repeating nothing.
// Workspace names are DNS labels, which never hold '_', so the workspace is whatever
// lies between the prefix and the last '_'.

// consumerSecretLen is the length of a consumer name's random part: 130 bits.
const consumerSecretLen = 26

var consumerSecretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// newConsumerName is a new, unguessable name of workspace ws's consumer.
func newConsumerName(prefix, ws string) (string, error) {
	b := make([]byte, 20)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("notify: consumer name: %w", err)
	}
	return prefix + "-" + ws + "_" + consumerSecretEncoding.EncodeToString(b)[:consumerSecretLen], nil
}

// parseConsumerName returns the workspace of a consumer name made with prefix; legacy
// reports the guessable "<prefix>-<workspace>" of earlier versions; ok is false for
// any other name.
func parseConsumerName(prefix, name string) (ws string, legacy, ok bool) {
	rest, found := strings.CutPrefix(name, prefix+"-")
	if !found {
		return "", false, false
	}
	ws, secret, hasSecret := cutLast(rest, "_")
	if !hasSecret {
		return rest, true, dnsLabelRE.MatchString(rest)
	}
	return ws, false, dnsLabelRE.MatchString(ws) && len(secret) == consumerSecretLen
}

func cutLast(s, sep string) (before, after string, found bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// workspaceConsumers lists the durable consumers made with prefix on the events
// stream, by workspace: the current names (sorted) and the legacy one, if any.
func workspaceConsumers(ctx context.Context, stream jetstream.Stream, prefix string) (current map[string][]string, legacy map[string]string, err error) {
	current, legacy = map[string][]string{}, map[string]string{}
	names := stream.ConsumerNames(ctx)
	for name := range names.Name() {
		ws, old, ok := parseConsumerName(prefix, name)
		switch {
		case !ok:
		case old:
			legacy[ws] = name
		default:
			current[ws] = append(current[ws], name)
		}
	}
	if err := names.Err(); err != nil {
		return nil, nil, fmt.Errorf("notify: list consumers of %s: %w", dlcjs.EventsStream, err)
	}
	for _, n := range current {
		slices.Sort(n)
	}
	return current, legacy, nil
}

// ConsumerNameOf returns the name of workspace ws's durable consumer that a dispatcher
// with prefix (DefaultConsumerPrefix unless WithConsumerPrefix) reads, or "" when there
// is none. It lists the consumers of DLC_EVENTS, which only the stack's own users may
// do.
func ConsumerNameOf(ctx context.Context, js jetstream.JetStream, prefix, ws string) (string, error) {
	stream, err := js.Stream(ctx, dlcjs.EventsStream)
	if err != nil {
		return "", fmt.Errorf("notify: stream %s: %w", dlcjs.EventsStream, err)
	}
	current, _, err := workspaceConsumers(ctx, stream, prefix)
	if err != nil || len(current[ws]) == 0 {
		return "", err
	}
	return current[ws][0], nil
}

// consumerFor returns the name of workspace ws's consumer: the existing one, else a
// new name. legacy is the guessable consumer of an earlier version, to delete once the
// new one exists; from is its state when the new one must take over from it.
func (d *Dispatcher) consumerFor(ctx context.Context, ws string) (name, legacy string, from *jetstream.ConsumerInfo, err error) {
	current, old, err := workspaceConsumers(ctx, d.stream, d.o.ConsumerPrefix)
	if err != nil {
		return "", "", nil, err
	}
	if n := current[ws]; len(n) > 0 {
		if len(n) > 1 {
			d.log.Warn("several consumers for one workspace; reading the first", "workspace", ws, "consumers", n)
		}
		return n[0], old[ws], nil, nil
	}
	if name, err = newConsumerName(d.o.ConsumerPrefix, ws); err != nil {
		return "", "", nil, err
	}
	if old[ws] == "" {
		return name, "", nil, nil
	}
	c, err := d.stream.Consumer(ctx, old[ws])
	if err != nil {
		return "", "", nil, fmt.Errorf("notify: consumer %s: %w", old[ws], err)
	}
	return name, old[ws], c.CachedInfo(), nil
}

// takeOver makes cfg start where the legacy consumer from left off: at its first
// unacknowledged event, or where it started when it acknowledged none.
func takeOver(cfg *jetstream.ConsumerConfig, from *jetstream.ConsumerInfo) {
	if floor := from.AckFloor.Stream; floor > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq, cfg.OptStartTime = jetstream.DeliverByStartSequencePolicy, floor+1, nil
		return
	}
	cfg.DeliverPolicy, cfg.OptStartTime, cfg.OptStartSeq = from.Config.DeliverPolicy, from.Config.OptStartTime, from.Config.OptStartSeq
}
