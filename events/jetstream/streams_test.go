package jetstream_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/events/jetstream"
)

// TestEnsureStreamsIsIdempotent: EnsureStreams runs at every start, updates limits, and
// declares every stream and bucket.
func TestEnsureStreamsIsIdempotent(t *testing.T) {
	ctx, c := connect(t)
	js := c.JetStream()
	if err := jetstream.EnsureStreams(ctx, js); err != nil {
		t.Fatal(err)
	}
	if err := jetstream.EnsureStreams(ctx, js, jetstream.WithNotifyRetention(jetstream.Retention{MaxAge: time.Hour, Duplicates: time.Minute})); err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctx, jetstream.NotifyStream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	if diff := cmp.Diff([]string{jetstream.NotifySubjects}, cfg.Subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
	if cfg.MaxAge != time.Hour || cfg.Duplicates != time.Minute {
		t.Errorf("retention not updated: max age %v, duplicates %v", cfg.MaxAge, cfg.Duplicates)
	}
	in, err := js.Stream(ctx, jetstream.InboundStream)
	if err != nil {
		t.Fatal(err)
	}
	if icfg := in.CachedInfo().Config; icfg.MaxAge != 7*24*time.Hour || icfg.MaxBytes != 1<<30 || icfg.Duplicates != time.Hour {
		t.Errorf("%s: max age %v, max bytes %d, duplicates %v", jetstream.InboundStream, icfg.MaxAge, icfg.MaxBytes, icfg.Duplicates)
	}
	for bucket, history := range map[string]uint8{jetstream.RulesBucket: 5, jetstream.TriggersBucket: 5, jetstream.PipelineTemplatesBucket: 5, jetstream.AuthBucket: 1} {
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatalf("bucket %s: %v", bucket, err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.History() != int64(history) {
			t.Errorf("bucket %s keeps %d revisions, want %d", bucket, st.History(), history)
		}
	}
	if err := jetstream.EnsureStreams(ctx, js, jetstream.WithRuleHistory(0)); err == nil {
		t.Errorf("rule history 0 accepted")
	}
	if err := jetstream.EnsureStreams(ctx, js, jetstream.WithTriggerHistory(65)); err == nil {
		t.Errorf("trigger history 65 accepted")
	}
}
