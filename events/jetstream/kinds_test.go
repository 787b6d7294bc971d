package jetstream

import (
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Every kind registers its subjects (streamKinds, kinds.go), and a stream captures
// each of them.
func TestEveryKindHasSubjects(t *testing.T) {
	registered := map[schemas.Kind]kindSubjects{}
	for _, k := range streamKinds {
		if _, dup := registered[k.kind]; dup {
			t.Errorf("kind %s registers twice in streamKinds (events/jetstream/kinds.go)", k.kind)
		}
		registered[k.kind] = k
		if !slices.Contains(schemas.Kinds(), k.kind) {
			t.Errorf("streamKinds registers kind %s, which is not in schemas.Kinds() (schemas/kinds.go)", k.kind)
		}
	}
	for _, kind := range schemas.Kinds() {
		k, ok := registered[kind]
		if !ok {
			t.Errorf("kind %s has no subjects: register the subjects it publishes in streamKinds (events/jetstream/kinds.go)", kind)
			continue
		}
		if err := k.check(); err != nil {
			t.Errorf("%v (events/jetstream/kinds.go)", err)
			continue
		}
		for _, s := range []struct {
			stream   string
			subjects []subjectOf
			captured []string
		}{
			{EventsStream, k.events, EventSubjects},
			{LogsStream, k.logs, LogSubjects},
			{InboundStream, k.inbound, InboundSubjects},
			{NotifyStream, k.notify, []string{NotifySubjects}},
		} {
			for _, f := range s.subjects {
				wildcard := f("*", "*")
				if !slices.Contains(s.captured, wildcard) {
					t.Errorf("kind %s: %s does not capture %s", kind, s.stream, wildcard)
				}
				if subject := f("ws1", "obj1"); !matches(wildcard, subject) || !strings.Contains(subject, "ws1") {
					t.Errorf("kind %s: subject %s is not of workspace ws1 and matched by %s", kind, subject, wildcard)
				}
			}
		}
	}
}

// matches reports whether a NATS subject filter matches a subject.
func matches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// A registration without subjects is refused.
func TestKindSubjectsRefusesMissingParts(t *testing.T) {
	if err := (kindSubjects{kind: schemas.KindSchedule}).check(); err == nil || !strings.Contains(err.Error(), "kind Schedule registers no subjects") {
		t.Errorf("no subjects: %v", err)
	}
}
