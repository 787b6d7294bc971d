package notify

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

func TestParseEvent(t *testing.T) {
	phase := `{"specversion":"1.0","id":"u:status:4","source":"/opendlc/workspaces/vision/jobs/resnet","type":"opendlc.job.phase.v1",` +
		`"subject":"resnet","time":"2026-11-30T20:00:07Z","datacontenttype":"application/json","workspace":"vision",` +
		`"data":{"job":"resnet","uid":"u","seq":4,"phase":"Succeeded","labels":{"team":"cv"}}}`
	type result struct {
		ID, Workspace string
		Facts         schemas.EventFacts
		Err           string
	}
	tests := map[string]struct {
		subject, data string
		want          result
	}{
		"phase event": {
			subject: "dlc.vision.job.resnet.status", data: phase,
			want: result{ID: "u:status:4", Workspace: "vision", Facts: schemas.EventFacts{
				Type: "opendlc.job.phase.v1", Job: "resnet", Phase: "Succeeded", Labels: map[string]string{"team": "cv"}}},
		},
		"metric event": {
			subject: "dlc.vision.job.resnet.metrics",
			data:    `{"id":"u:a0:w-0:m1","type":"opendlc.job.metric.v1","subject":"resnet","workspace":"vision","data":{"job":"resnet","values":{"loss":1}}}`,
			want:    result{ID: "u:a0:w-0:m1", Workspace: "vision", Facts: schemas.EventFacts{Type: "opendlc.job.metric.v1", Job: "resnet"}},
		},
		"job from the CloudEvent subject": {
			subject: "dlc.vision.job.resnet.status",
			data:    `{"id":"x","type":"opendlc.job.phase.v1","subject":"resnet","data":"not an object"}`,
			want:    result{ID: "x", Workspace: "vision", Facts: schemas.EventFacts{Type: "opendlc.job.phase.v1", Job: "resnet"}},
		},
		"envelope claims another workspace": {
			subject: "dlc.nlp.job.resnet.status", data: phase,
			want: result{Err: `event of workspace "vision" published on dlc.nlp.job.resnet.status`},
		},
		"not JSON": {
			subject: "dlc.vision.job.resnet.status", data: "hello",
			want: result{Err: "not a CloudEvent: invalid character 'h' looking for beginning of value"},
		},
		"no id": {
			subject: "dlc.vision.job.resnet.status", data: `{"type":"opendlc.job.phase.v1"}`,
			want: result{Err: "event without an id"},
		},
		"not a dlc subject": {
			subject: "other.vision", data: phase,
			want: result{Err: `subject "other.vision" is not dlc.<workspace>....`},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := parseEvent(tt.subject, []byte(tt.data))
			var got result
			if err != nil {
				got.Err = err.Error()
			} else {
				got = result{ID: ev.id, Workspace: ev.workspace, Facts: ev.facts}
				if string(ev.raw) != tt.data {
					t.Errorf("raw bytes changed")
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseEvent (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSeqSet(t *testing.T) {
	s := newSeqSet(3)
	for _, seq := range []uint64{1, 2, 3, 4} {
		s.add(seq)
	}
	got := map[uint64]bool{}
	for _, seq := range []uint64{1, 2, 3, 4, 5} {
		got[seq] = s.has(seq)
	}
	want := map[uint64]bool{1: false, 2: true, 3: true, 4: true, 5: false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("has after adding 1-4 to a set of 3 (-want +got):\n%s", diff)
	}
}
