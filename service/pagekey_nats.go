package service

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	evjs "github.com/opendlc/opendlc/events/jetstream"
)

// pageKeyName is the key of the page-token key in the DLC_AUTH bucket (beside the
// tokens' hashes and the workspace registry, which only the stack's own NATS
// identities may read; package auth reads none but its own keys).
const pageKeyName = "apikey.pagetoken"

// pageKeyTimeout bounds reading or creating the page-token key.
const pageKeyTimeout = 5 * time.Second

// NATSPageKey is the source of the key that seals page tokens (PageKeySource):
// 32 random bytes kept in NATS, made by the first API server that needs them, so
// that every API server of an installation opens the tokens of the others, and the
// tokens outlive a restart.
func NATSPageKey(js jetstream.JetStream) PageKeySource {
	return func(ctx context.Context) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, pageKeyTimeout)
		defer cancel()
		kv, err := js.KeyValue(ctx, evjs.AuthBucket)
		if err != nil {
			return nil, fmt.Errorf("page token key: %w", err)
		}
		e, err := kv.Get(ctx, pageKeyName)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			key := make([]byte, 32)
			_, _ = rand.Read(key) // never fails (crypto/rand)
			_, err = kv.Create(ctx, pageKeyName, key)
			if err == nil {
				return key, nil
			}
			if errors.Is(err, jetstream.ErrKeyExists) { // another server made it first
				e, err = kv.Get(ctx, pageKeyName)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("page token key: %w", err)
		}
		return e.Value(), nil
	}
}
