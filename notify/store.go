package notify

import (
	"context"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/internal/kvdocs"
	"github.com/opendlc/opendlc/schemas"
)

var dnsLabelRE = kvdocs.DNSLabelRE

// RuleKey is the DLC_RULES key of a rule: "<workspace>.<name>".
func RuleKey(workspace, name string) string { return kvdocs.Key(workspace, name) }

// splitKey is the inverse of RuleKey.
func splitKey(key string) (workspace, name string, ok bool) {
	workspace, name, ok = strings.Cut(key, ".")
	return workspace, name, ok && dnsLabelRE.MatchString(workspace) && dnsLabelRE.MatchString(name)
}

// Store keeps NotificationRules in the DLC_RULES bucket (Put, Get, List, Delete). A
// running Dispatcher applies every change within moments.
type Store struct {
	*kvdocs.Store[*schemas.NotificationRule]
}

// ruleKind describes rules to kvdocs.
var ruleKind = kvdocs.Kind[*schemas.NotificationRule]{
	Pkg: "notify", Noun: "rule",
	Decode:      schemas.DecodeNotificationRule,
	Prepare:     kvdocs.Prepare(schemas.KindNotificationRule, func(r *schemas.NotificationRule) (*string, *schemas.Kind) { return &r.APIVersion, &r.Kind }),
	Validate:    func(r *schemas.NotificationRule) schemas.ErrorList { return r.Validate() },
	Meta:        func(r *schemas.NotificationRule) (string, string) { return r.Metadata.Workspace, r.Metadata.Name },
	NotFound:    ErrNotFound,
	InvalidName: ErrInvalidName,
}

// OpenStore opens the rules bucket, which events/jetstream.EnsureStreams creates.
func OpenStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	s, err := kvdocs.Open(ctx, js, RulesBucket, ruleKind)
	if err != nil {
		return nil, err
	}
	return &Store{s}, nil
}

// decodeRule reads a stored rule and validates it again.
func decodeRule(data []byte) (*schemas.NotificationRule, error) {
	return kvdocs.Decode(ruleKind, data)
}
