package notify

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

// RuleKey is the DLC_RULES key of a rule: "<workspace>.<name>".
func RuleKey(workspace, name string) string { return workspace + "." + name }

// splitKey is the inverse of RuleKey.
func splitKey(key string) (workspace, name string, ok bool) {
	workspace, name, ok = strings.Cut(key, ".")
	return workspace, name, ok && dnsLabelRE.MatchString(workspace) && dnsLabelRE.MatchString(name)
}

func checkNames(workspace string, name ...string) error {
	for _, n := range append([]string{workspace}, name...) {
		if len(n) > 63 || !dnsLabelRE.MatchString(n) {
			return fmt.Errorf("%w: %q is not a DNS label", ErrInvalidName, n)
		}
	}
	return nil
}

// Store keeps NotificationRules in the DLC_RULES bucket. A running Dispatcher applies
// every change within moments.
type Store struct {
	kv jetstream.KeyValue
}

// OpenStore opens the rules bucket, which EnsureStreams creates.
func OpenStore(ctx context.Context, js jetstream.JetStream) (*Store, error) {
	kv, err := js.KeyValue(ctx, RulesBucket)
	if err != nil {
		return nil, fmt.Errorf("notify: open bucket %s (created by notify.EnsureStreams): %w", RulesBucket, err)
	}
	return &Store{kv: kv}, nil
}

// Put validates rule (after applying its defaults, in place) and stores it, replacing a
// rule of the same name in the same workspace. It returns the bucket revision of the
// change, which Dispatcher.AppliedRevision reports once the change is in effect. An
// invalid rule is refused with its schemas.ErrorList.
func (s *Store) Put(ctx context.Context, rule *schemas.NotificationRule) (uint64, error) {
	rule.Default()
	if errs := rule.Validate(); len(errs) > 0 {
		return 0, errs
	}
	if rule.APIVersion == "" {
		rule.APIVersion = schemas.APIVersion
	}
	if rule.Kind == "" {
		rule.Kind = schemas.KindNotificationRule
	}
	data, err := json.Marshal(rule)
	if err != nil {
		return 0, fmt.Errorf("notify: encode rule: %w", err)
	}
	rev, err := s.kv.Put(ctx, RuleKey(rule.Metadata.Workspace, rule.Metadata.Name), data)
	if err != nil {
		return 0, fmt.Errorf("notify: put rule %s/%s: %w", rule.Metadata.Workspace, rule.Metadata.Name, err)
	}
	return rev, nil
}

// Get returns a rule, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, workspace, name string) (*schemas.NotificationRule, error) {
	if err := checkNames(workspace, name); err != nil {
		return nil, err
	}
	e, err := s.kv.Get(ctx, RuleKey(workspace, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, workspace, name)
	}
	if err != nil {
		return nil, fmt.Errorf("notify: get rule %s/%s: %w", workspace, name, err)
	}
	return decodeRule(e.Value())
}

// List returns the rules of a workspace, sorted by name.
func (s *Store) List(ctx context.Context, workspace string) ([]*schemas.NotificationRule, error) {
	if err := checkNames(workspace); err != nil {
		return nil, err
	}
	w, err := s.kv.Watch(ctx, workspace+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("notify: list rules of %s: %w", workspace, err)
	}
	defer w.Stop()
	var rules []*schemas.NotificationRule
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("notify: list rules of %s: watcher closed", workspace)
			}
			if e == nil {
				slices.SortFunc(rules, func(a, b *schemas.NotificationRule) int {
					return strings.Compare(a.Metadata.Name, b.Metadata.Name)
				})
				return rules, nil
			}
			r, err := decodeRule(e.Value())
			if err != nil {
				return nil, fmt.Errorf("notify: rule %s: %w", e.Key(), err)
			}
			rules = append(rules, r)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Delete removes a rule; it returns an error wrapping ErrNotFound when there is none.
func (s *Store) Delete(ctx context.Context, workspace, name string) error {
	if _, err := s.Get(ctx, workspace, name); err != nil {
		return err
	}
	if err := s.kv.Delete(ctx, RuleKey(workspace, name)); err != nil {
		return fmt.Errorf("notify: delete rule %s/%s: %w", workspace, name, err)
	}
	return nil
}

// decodeRule reads a stored rule. Stored rules were validated by Put; they are
// validated again because anyone with access to the bucket can write it.
func decodeRule(data []byte) (*schemas.NotificationRule, error) {
	r, err := schemas.DecodeNotificationRule(data)
	if err != nil {
		return nil, fmt.Errorf("notify: stored rule: %w", err)
	}
	if errs := r.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("notify: stored rule is invalid: %w", errs)
	}
	return r, nil
}
