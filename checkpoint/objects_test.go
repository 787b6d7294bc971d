package checkpoint

import (
	"context"
	"testing"
	"time"
)

// FirstModifiedAfter finds an object under a prefix only when one was modified after the
// given time, and ignores objects next to the prefix.
func TestFirstModifiedAfter(t *testing.T) {
	s := testStore(t)
	ctx := context.Background()
	uri := "s3://ckpt/" + t.Name() + "/clicks"
	before := time.Now().Add(-time.Minute)

	if _, _, found, err := s.FirstModifiedAfter(ctx, uri, before); err != nil || found {
		t.Fatalf("empty prefix: found %v, err %v; want nothing", found, err)
	}
	if err := s.put(ctx, "ckpt", t.Name()+"/clicks-old/part-0", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	if _, _, found, err := s.FirstModifiedAfter(ctx, uri, before); err != nil || found {
		t.Fatalf("object beside the prefix: found %v, err %v; want nothing", found, err)
	}
	if err := s.put(ctx, "ckpt", t.Name()+"/clicks/2026/01/02/part-0", []byte("x"), ""); err != nil {
		t.Fatal(err)
	}
	key, mod, found, err := s.FirstModifiedAfter(ctx, uri, before)
	if err != nil || !found || key != t.Name()+"/clicks/2026/01/02/part-0" || !mod.After(before) {
		t.Fatalf("new object: key %q modified %s found %v err %v", key, mod, found, err)
	}
	if _, _, found, err := s.FirstModifiedAfter(ctx, uri, time.Now().Add(time.Minute)); err != nil || found {
		t.Errorf("nothing newer than a minute from now: found %v, err %v", found, err)
	}
	if _, _, _, err := s.FirstModifiedAfter(ctx, "gs://elsewhere/x", before); err == nil {
		t.Error("a non-S3 URI is accepted")
	}
}
