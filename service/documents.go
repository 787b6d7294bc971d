package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
)

// docStore is a key-value store of one kind of document, per workspace and name
// (triggers.Store, notify.Store).
type docStore[T any] interface {
	Put(ctx context.Context, doc T) (uint64, error)
	Get(ctx context.Context, workspace, name string) (T, error)
	List(ctx context.Context, workspace string) ([]T, error)
	Delete(ctx context.Context, workspace, name string) error
}

// Documents is the service of a kind that is a stored document rather than a workflow
// (triggers, notification rules): apply, get, list, delete.
type Documents[T any] struct {
	store docStore[T]
	// object names the kind in not-found messages; noun in internal failures.
	object, noun string
	// missing are the store's errors that mean "no such document"; badList the one a
	// listing of an impossible workspace name answers (an empty list), if any.
	missing []error
	badList error
	// check, when set, vets a document before Apply stores it (SetStorage).
	check func(context.Context, T) error
	// stamp, when set, records what the server knows of the call in the document
	// before Apply stores it (a trigger's owner).
	stamp func(context.Context, T)
}

// sentinelStore is a docStore that names its sentinel errors (internal/kvdocs's
// Store, which triggers.Store is: the trigger dispatcher starts its actions through
// this package, so this package cannot import triggers).
type sentinelStore[T any] interface {
	docStore[T]
	Sentinels() (notFound, invalidName error)
}

// NewTriggers is the trigger service over store (a triggers.Store).
func NewTriggers(store sentinelStore[*schemas.Trigger]) *Documents[*schemas.Trigger] {
	notFound, invalidName := store.Sentinels()
	return &Documents[*schemas.Trigger]{store: store, object: "trigger", noun: "trigger",
		missing: []error{notFound, invalidName}, badList: invalidName, stamp: stampTriggerOwner}
}

// stampTriggerOwner records the caller as the trigger's owner (schemas.AnnotationOwner),
// replacing what the document says: the trigger dispatcher starts the trigger's runs
// under it (DlcOwner).
func stampTriggerOwner(ctx context.Context, t *schemas.Trigger) {
	owner := OwnerFrom(ctx)
	if owner == "" {
		delete(t.Metadata.Annotations, schemas.AnnotationOwner)
		return
	}
	if t.Metadata.Annotations == nil {
		t.Metadata.Annotations = map[string]string{}
	}
	t.Metadata.Annotations[schemas.AnnotationOwner] = owner
}

// NewRules is the notification rule service over store.
func NewRules(store *notify.Store) *Documents[*schemas.NotificationRule] {
	return &Documents[*schemas.NotificationRule]{store: store, object: "notification rule", noun: "rule",
		missing: []error{notify.ErrNotFound}}
}

func (s *Documents[T]) isMissing(err error) bool {
	for _, m := range s.missing {
		if errors.Is(err, m) {
			return true
		}
	}
	return false
}

// Apply creates or replaces a validated document. One the store refuses is a
// schemas.ErrorList naming each field.
func (s *Documents[T]) Apply(ctx context.Context, doc T) (T, error) {
	if s.check != nil {
		if err := s.check(ctx, doc); err != nil {
			return doc, err
		}
	}
	if s.stamp != nil {
		s.stamp(ctx, doc)
	}
	if _, err := s.store.Put(ctx, doc); err != nil {
		if list, ok := errors.AsType[schemas.ErrorList](err); ok {
			return doc, list
		}
		return doc, fmt.Errorf("store %s: %w", s.noun, err)
	}
	return doc, nil
}

// Get answers one document.
func (s *Documents[T]) Get(ctx context.Context, ws, name string) (T, error) {
	doc, err := s.store.Get(ctx, ws, name)
	if s.isMissing(err) {
		return doc, notFound(s.object, ws, name)
	}
	if err != nil {
		return doc, fmt.Errorf("get %s: %w", s.noun, err)
	}
	return doc, nil
}

// List answers a workspace's documents.
func (s *Documents[T]) List(ctx context.Context, ws string) ([]T, error) {
	docs, err := s.store.List(ctx, ws)
	if s.badList != nil && errors.Is(err, s.badList) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", s.noun, err)
	}
	return docs, nil
}

// Delete deletes one document.
func (s *Documents[T]) Delete(ctx context.Context, ws, name string) error {
	err := s.store.Delete(ctx, ws, name)
	if s.isMissing(err) {
		return notFound(s.object, ws, name)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", s.noun, err)
	}
	return nil
}
