package jetstream_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/events/jetstream"
)

// Retention limits apply like a logstore's TTL and quota, and a repeated message id is
// stored once.
func TestRetentionAndDeduplication(t *testing.T) {
	ctx, c := connect(t)
	if err := c.EnsureStreams(ctx,
		jetstream.WithLogRetention(jetstream.Retention{MaxAge: time.Hour, MaxMsgsPerSubject: 3, Duplicates: time.Minute}),
		jetstream.WithEventRetention(jetstream.Retention{MaxAge: 2 * time.Hour, MaxBytes: 1 << 20, Duplicates: time.Minute}),
	); err != nil {
		t.Fatal(err)
	}
	subject := events.JobLogSubject("ws", "j", "worker", 0)
	for i := 1; i <= 5; i++ {
		msg := events.Msg{Subject: subject, ID: fmt.Sprintf("line-%d", i), Data: []byte(strconv.Itoa(i))}
		if err := c.Publish(ctx, msg, msg); err != nil { // each twice: the duplicate is dropped
			t.Fatal(err)
		}
	}
	var got []string
	if err := c.ReadUntil(ctx, jetstream.LogsStream, subject, nil, func(_ string, data []byte) error {
		got = append(got, string(data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[3 4 5]" {
		t.Errorf("kept %v, want the last 3 lines once each", got)
	}
	s, err := c.JetStream().Stream(ctx, jetstream.EventsStream)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := s.CachedInfo().Config; cfg.MaxAge != 2*time.Hour || cfg.MaxBytes != 1<<20 {
		t.Errorf("events stream: max age %s, max bytes %d", cfg.MaxAge, cfg.MaxBytes)
	}
}
