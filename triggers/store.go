package triggers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/opendlc/opendlc/schemas"
)

var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Key is the DLC_TRIGGERS key of a trigger: "<workspace>.<name>".
func Key(workspace, name string) string { return workspace + "." + name }

func checkNames(names ...string) error {
	for _, n := range names {
		if len(n) > 63 || !dnsLabelRE.MatchString(n) {
			return fmt.Errorf("%w: %q is not a DNS label", ErrInvalidName, n)
		}
	}
	return nil
}

// Store keeps Triggers in the DLC_TRIGGERS bucket. A running Dispatcher applies every
// change to the events it reads after the change was stored.
type Store struct {
	kv jetstream.KeyValue
}

// OpenStore opens the triggers bucket, which EnsureStreams creates.
func OpenStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, TriggersBucket)
	if err != nil {
		return nil, fmt.Errorf("triggers: open bucket %s (created by triggers.EnsureStreams): %w", TriggersBucket, err)
	}
	return &Store{kv: kv}, nil
}

// Put validates t (after applying its defaults, in place) and stores it, replacing a
// trigger of the same name in the same workspace. It returns the bucket revision of the
// change. An invalid trigger is refused with its schemas.ErrorList.
func (s *Store) Put(ctx context.Context, t *schemas.Trigger) (uint64, error) {
	t.Default()
	if errs := t.Validate(); len(errs) > 0 {
		return 0, errs
	}
	if t.APIVersion == "" {
		t.APIVersion = schemas.APIVersion
	}
	if t.Kind == "" {
		t.Kind = schemas.KindTrigger
	}
	data, err := json.Marshal(t)
	if err != nil {
		return 0, fmt.Errorf("triggers: encode trigger: %w", err)
	}
	rev, err := s.kv.Put(ctx, Key(t.Metadata.Workspace, t.Metadata.Name), data)
	if err != nil {
		return 0, fmt.Errorf("triggers: put trigger %s/%s: %w", t.Metadata.Workspace, t.Metadata.Name, err)
	}
	return rev, nil
}

// Get returns a trigger, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, workspace, name string) (*schemas.Trigger, error) {
	if err := checkNames(workspace, name); err != nil {
		return nil, err
	}
	e, err := s.kv.Get(ctx, Key(workspace, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, workspace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("triggers: get trigger %s/%s: %w", workspace, name, err)
	}
	return decodeTrigger(e.Value())
}

// List returns the triggers of a workspace, sorted by name.
func (s *Store) List(ctx context.Context, workspace string) ([]*schemas.Trigger, error) {
	if err := checkNames(workspace); err != nil {
		return nil, err
	}
	w, err := s.kv.Watch(ctx, workspace+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("triggers: list triggers of %s: %w", workspace, err)
	}
	defer func() { _ = w.Stop() }()
	var out []*schemas.Trigger
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("triggers: list triggers of %s: watcher closed", workspace)
			}
			if e == nil {
				slices.SortFunc(out, func(a, b *schemas.Trigger) int {
					return strings.Compare(a.Metadata.Name, b.Metadata.Name)
				})
				return out, nil
			}
			t, err := decodeTrigger(e.Value())
			if err != nil {
				return nil, fmt.Errorf("triggers: trigger %s: %w", e.Key(), err)
			}
			out = append(out, t)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Delete removes a trigger; it returns an error wrapping ErrNotFound when there is none.
// What the trigger started keeps running.
func (s *Store) Delete(ctx context.Context, workspace, name string) error {
	if _, err := s.Get(ctx, workspace, name); err != nil {
		return err
	}
	if err := s.kv.Delete(ctx, Key(workspace, name)); err != nil {
		return fmt.Errorf("triggers: delete trigger %s/%s: %w", workspace, name, err)
	}
	return nil
}

// decodeTrigger reads a stored trigger. Stored triggers were validated by Put; they are
// validated again because anyone with access to the bucket can write it.
func decodeTrigger(data []byte) (*schemas.Trigger, error) {
	t, err := schemas.DecodeTrigger(data)
	if err != nil {
		return nil, fmt.Errorf("triggers: stored trigger: %w", err)
	}
	if errs := t.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("triggers: stored trigger is invalid: %w", errs)
	}
	return t, nil
}
