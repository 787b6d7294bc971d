package triggers

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/internal/kvdocs"
	"github.com/opendlc/opendlc/schemas"
)

var dnsLabelRE = kvdocs.DNSLabelRE

// Key is the DLC_TRIGGERS key of a trigger: "<workspace>.<name>".
func Key(workspace, name string) string { return kvdocs.Key(workspace, name) }

// Store keeps Triggers in the DLC_TRIGGERS bucket (Put, Get, List, Delete). A running
// Dispatcher applies every change to the events it reads after the change was stored.
// Delete leaves running what the trigger started.
type Store struct {
	*kvdocs.Store[*schemas.Trigger]
}

// triggerKind describes triggers to kvdocs.
var triggerKind = kvdocs.Kind[*schemas.Trigger]{
	Pkg: "triggers", Noun: "trigger",
	Decode:      schemas.DecodeTrigger,
	Prepare:     kvdocs.Prepare(schemas.KindTrigger, func(t *schemas.Trigger) (*string, *schemas.Kind) { return &t.APIVersion, &t.Kind }),
	Validate:    func(t *schemas.Trigger) schemas.ErrorList { return t.Validate() },
	Meta:        func(t *schemas.Trigger) (string, string) { return t.Metadata.Workspace, t.Metadata.Name },
	NotFound:    ErrNotFound,
	InvalidName: ErrInvalidName,
}

// OpenStore opens the triggers bucket, which events/jetstream.EnsureStreams creates.
func OpenStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	s, err := kvdocs.Open(ctx, js, TriggersBucket, triggerKind)
	if err != nil {
		return nil, err
	}
	return &Store{s}, nil
}

// decodeTrigger reads a stored trigger and validates it again.
func decodeTrigger(data []byte) (*schemas.Trigger, error) { return kvdocs.Decode(triggerKind, data) }
