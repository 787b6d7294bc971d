package notify

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	dlcjs "github.com/opendlc/opendlc/events/jetstream"
)

// A workspace's durable consumer is named "<prefix>-<workspace>_<secret>": the secret
// is 26 random characters, so that no workspace reader can guess the name and read or
// pull from the consumer (their NATS permissions allow consumer requests by name, for
// their own consumers, and never a consumer list). The dispatcher records the name in
// the key-value bucket DLC_NOTIFY_CONSUMERS (key "<prefix>.<workspace>"), which only the
// stack's identities can read or write, before it creates the consumer, and resumes only
// the consumer recorded there: a reader can create a durable consumer with any name in
// its own workspace, so a name that merely looks like the dispatcher's proves nothing.
// Another consumer with a name of the pattern is deleted; one that an earlier version
// created (before the bucket existed, filtered on the whole workspace) is taken over at
// its first unacknowledged event first. Workspace names are DNS labels, which never
// hold '_', so the workspace is whatever lies between the prefix and the last '_'.

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

// registryKey is the DLC_NOTIFY_CONSUMERS key of the consumer of workspace ws.
func registryKey(prefix, ws string) string { return prefix + "." + ws }

// workspaceConsumers lists the durable consumers on the events stream whose names
// follow prefix's pattern, current or legacy, by workspace, sorted by name. Anyone who
// may create a consumer can make such a name: they are candidates, never proof.
func workspaceConsumers(ctx context.Context, stream jetstream.Stream, prefix string) (map[string][]*jetstream.ConsumerInfo, error) {
	byWS := map[string][]*jetstream.ConsumerInfo{}
	infos := stream.ListConsumers(ctx)
	for info := range infos.Info() {
		if ws, _, ok := parseConsumerName(prefix, info.Name); ok {
			byWS[ws] = append(byWS[ws], info)
		}
	}
	if err := infos.Err(); err != nil {
		return nil, fmt.Errorf("notify: list consumers of %s: %w", dlcjs.EventsStream, err)
	}
	for _, l := range byWS {
		slices.SortFunc(l, func(a, b *jetstream.ConsumerInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	return byWS, nil
}

// ConsumerNameOf returns the name of workspace ws's durable consumer that a dispatcher
// with prefix (DefaultConsumerPrefix unless WithConsumerPrefix) reads, or "" when there
// is none. It reads DLC_NOTIFY_CONSUMERS and the consumers of DLC_EVENTS, which only the
// stack's own users may do.
func ConsumerNameOf(ctx context.Context, js jetstream.JetStream, prefix, ws string) (string, error) {
	kv, err := js.KeyValue(ctx, dlcjs.NotifyConsumersBucket)
	if err != nil {
		return "", fmt.Errorf("notify: bucket %s: %w", dlcjs.NotifyConsumersBucket, err)
	}
	name, err := registered(ctx, kv, prefix, ws)
	if err != nil || name == "" {
		return "", err
	}
	if _, err := js.Consumer(ctx, dlcjs.EventsStream, name); errors.Is(err, jetstream.ErrConsumerNotFound) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("notify: consumer %s: %w", name, err)
	}
	return name, nil
}

// registered is the consumer name recorded for ws, or "".
func registered(ctx context.Context, kv jetstream.KeyValue, prefix, ws string) (string, error) {
	e, err := kv.Get(ctx, registryKey(prefix, ws))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("notify: bucket %s: %w", dlcjs.NotifyConsumersBucket, err)
	}
	name := string(e.Value())
	if got, legacy, ok := parseConsumerName(prefix, name); !ok || legacy || got != ws {
		return "", fmt.Errorf("notify: bucket %s: %q is no consumer name of workspace %s", dlcjs.NotifyConsumersBucket, name, ws)
	}
	return name, nil
}

// consumerFor returns the name of workspace ws's consumer: the recorded one, else a new
// name, recorded before it is created. stale are the other consumers named like it, to
// delete once the worker's consumer exists; from is the state of the one to take over,
// an earlier version's consumer of the workspace, when the name is new.
func (d *Dispatcher) consumerFor(ctx context.Context, ws string) (name string, stale []string, from *jetstream.ConsumerInfo, err error) {
	byWS, err := workspaceConsumers(ctx, d.stream, d.o.ConsumerPrefix)
	if err != nil {
		return "", nil, nil, err
	}
	if name, err = registered(ctx, d.owned, d.o.ConsumerPrefix, ws); err != nil {
		return "", nil, nil, err
	}
	if name == "" {
		if name, err = newConsumerName(d.o.ConsumerPrefix, ws); err != nil {
			return "", nil, nil, err
		}
		if _, err := d.owned.Create(ctx, registryKey(d.o.ConsumerPrefix, ws), []byte(name)); err != nil {
			return "", nil, nil, fmt.Errorf("notify: record consumer %s: %w", name, err)
		}
		from = d.takeOverFrom(ws, byWS[ws])
	}
	for _, c := range byWS[ws] {
		if c.Name != name {
			stale = append(stale, c.Name)
		}
	}
	if len(stale) > 0 {
		d.log.Warn("consumers named like the dispatcher's that it did not record: deleting them", "workspace", ws, "consumers", stale)
	}
	return name, stale, from, nil
}

// takeOverFrom picks among the unrecorded consumers of ws the one an earlier version
// of the dispatcher created: made before DLC_NOTIFY_CONSUMERS existed, filtered on the
// whole workspace; of several, the one furthest behind, so that nothing is lost. nil
// when there is none: a reader's consumer never sets where the dispatcher starts.
func (d *Dispatcher) takeOverFrom(ws string, candidates []*jetstream.ConsumerInfo) *jetstream.ConsumerInfo {
	var from *jetstream.ConsumerInfo
	for _, c := range candidates {
		if !c.Created.Before(d.ownedSince) || c.Config.FilterSubject != "dlc."+ws+".>" || len(c.Config.FilterSubjects) > 0 {
			continue
		}
		if from == nil || c.AckFloor.Stream < from.AckFloor.Stream {
			from = c
		}
	}
	return from
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
