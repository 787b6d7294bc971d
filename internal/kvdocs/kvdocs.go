// Package kvdocs keeps validated spec documents (notification rules, triggers) in a
// NATS JetStream key-value bucket, one key "<workspace>.<name>" per document. Stored
// documents are validated again when read, because anyone with access to the bucket can
// write it.
package kvdocs

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

// DNSLabelRE matches a workspace or document name.
var DNSLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Key is the key of a document: "<workspace>.<name>".
func Key(workspace, name string) string { return workspace + "." + name }

// Document is what Prepare needs of a document.
type Document interface {
	Default()
	Validate() schemas.ErrorList
}

// Prepare is a Kind.Prepare: it applies a document's defaults and validates it, then
// fills an empty API version and kind (typeMeta points at them) with
// schemas.APIVersion and kind.
func Prepare[T Document](kind schemas.Kind, typeMeta func(T) (*string, *schemas.Kind)) func(T) schemas.ErrorList {
	return func(d T) schemas.ErrorList {
		d.Default()
		if errs := d.Validate(); len(errs) > 0 {
			return errs
		}
		apiVersion, k := typeMeta(d)
		if *apiVersion == "" {
			*apiVersion = schemas.APIVersion
		}
		if *k == "" {
			*k = kind
		}
		return nil
	}
}

// Kind describes one kind of document for a Store.
type Kind[T any] struct {
	// Pkg prefixes error messages ("notify"); Noun names the document ("rule").
	Pkg, Noun string
	// Decode reads a document strictly (schemas.DecodeX).
	Decode func([]byte) (T, error)
	// Prepare applies defaults, the API version and the kind, then validates.
	Prepare func(T) schemas.ErrorList
	// Validate checks a document read back.
	Validate func(T) schemas.ErrorList
	// Meta returns a document's workspace and name.
	Meta func(T) (workspace, name string)
	// NotFound and InvalidName are the package's sentinel errors.
	NotFound, InvalidName error
}

// Store keeps documents of one kind in a bucket.
type Store[T any] struct {
	kv   jetstream.KeyValue
	kind Kind[T]
}

// Open opens bucket, which events/jetstream.EnsureStreams creates.
func Open[T any](ctx context.Context, js jetstream.JetStream, bucket string, kind Kind[T]) (*Store[T], error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("%s: open bucket %s (created by jetstream.EnsureStreams): %w", kind.Pkg, bucket, err)
	}
	return &Store[T]{kv: kv, kind: kind}, nil
}

// Sentinels are the errors of s's kind that mean "no such document" and "not a valid
// name", for callers that cannot import the package that declares them.
func (s *Store[T]) Sentinels() (notFound, invalidName error) {
	return s.kind.NotFound, s.kind.InvalidName
}

// CheckNames refuses names that are not DNS labels, wrapping invalid.
func CheckNames(invalid error, names ...string) error {
	for _, n := range names {
		if len(n) > 63 || !DNSLabelRE.MatchString(n) {
			return fmt.Errorf("%w: %q is not a DNS label", invalid, n)
		}
	}
	return nil
}

// Put prepares and validates doc (in place) and stores it, replacing the document of
// the same name in the same workspace. It returns the bucket revision of the change. An
// invalid document is refused with its schemas.ErrorList.
func (s *Store[T]) Put(ctx context.Context, doc T) (uint64, error) {
	k := s.kind
	if errs := k.Prepare(doc); len(errs) > 0 {
		return 0, errs
	}
	data, err := json.Marshal(doc)
	if err != nil {
		return 0, fmt.Errorf("%s: encode %s: %w", k.Pkg, k.Noun, err)
	}
	ws, name := k.Meta(doc)
	rev, err := s.kv.Put(ctx, Key(ws, name), data)
	if err != nil {
		return 0, fmt.Errorf("%s: put %s %s/%s: %w", k.Pkg, k.Noun, ws, name, err)
	}
	return rev, nil
}

// Get returns a document, or an error wrapping Kind.NotFound.
func (s *Store[T]) Get(ctx context.Context, workspace, name string) (T, error) {
	k := s.kind
	var zero T
	if err := CheckNames(k.InvalidName, workspace, name); err != nil {
		return zero, err
	}
	e, err := s.kv.Get(ctx, Key(workspace, name))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return zero, fmt.Errorf("%w: %s/%s", k.NotFound, workspace, name)
	}
	if err != nil {
		return zero, fmt.Errorf("%s: get %s %s/%s: %w", k.Pkg, k.Noun, workspace, name, err)
	}
	return s.Decode(e.Value())
}

// List returns the documents of a workspace, sorted by name.
func (s *Store[T]) List(ctx context.Context, workspace string) ([]T, error) {
	k := s.kind
	if err := CheckNames(k.InvalidName, workspace); err != nil {
		return nil, err
	}
	w, err := s.kv.Watch(ctx, workspace+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("%s: list %ss of %s: %w", k.Pkg, k.Noun, workspace, err)
	}
	defer func() { _ = w.Stop() }()
	var out []T
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%s: list %ss of %s: watcher closed", k.Pkg, k.Noun, workspace)
			}
			if e == nil {
				slices.SortFunc(out, func(a, b T) int {
					_, na := k.Meta(a)
					_, nb := k.Meta(b)
					return strings.Compare(na, nb)
				})
				return out, nil
			}
			d, err := s.Decode(e.Value())
			if err != nil {
				return nil, fmt.Errorf("%s: %s %s: %w", k.Pkg, k.Noun, e.Key(), err)
			}
			out = append(out, d)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Delete removes a document; it returns an error wrapping Kind.NotFound when there is
// none.
func (s *Store[T]) Delete(ctx context.Context, workspace, name string) error {
	if _, err := s.Get(ctx, workspace, name); err != nil {
		return err
	}
	if err := s.kv.Delete(ctx, Key(workspace, name)); err != nil {
		return fmt.Errorf("%s: delete %s %s/%s: %w", s.kind.Pkg, s.kind.Noun, workspace, name, err)
	}
	return nil
}

// Decode reads a stored document and validates it again.
func (s *Store[T]) Decode(data []byte) (T, error) { return Decode(s.kind, data) }

// Decode reads a stored document of kind k and validates it again.
func Decode[T any](k Kind[T], data []byte) (T, error) {
	var zero T
	d, err := k.Decode(data)
	if err != nil {
		return zero, fmt.Errorf("%s: stored %s: %w", k.Pkg, k.Noun, err)
	}
	if errs := k.Validate(d); len(errs) > 0 {
		return zero, fmt.Errorf("%s: stored %s is invalid: %w", k.Pkg, k.Noun, errs)
	}
	return d, nil
}
