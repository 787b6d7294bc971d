package triggers_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/triggers"
)

// versityRecord is an S3 notification as versitygw publishes it for a PutObject.
const versityRecord = `{"Records":[{"eventVersion":"2.2","eventSource":"aws:s3","awsRegion":"us-east-1",
"eventTime":"2026-12-01T02:00:00Z","eventName":"s3:ObjectCreated:Put","userIdentity":{"PrincipalId":"dlcdev"},
"s3":{"s3SchemaVersion":"1.0","configurationId":"webhook-global",
"bucket":{"name":"datasets","ownerIdentity":{"PrincipalId":"dlcdev"},"arn":"arn:aws:s3:::/datasets/clicks/a.csv"},
"object":{"key":"clicks/a.csv","size":12,"eTag":"\"0cc175b9\"","versionId":null,"sequencer":"1A"}}}]}`

func TestParseEvent(t *testing.T) {
	tests := map[string]struct {
		subject, data string
		wantID        string
		wantKey       string
		wantWorkspace string
		wantType      any
		wantErr       error
	}{
		"cloudevent": {
			subject: "dlc.vision.trigger.retrain",
			data:    `{"specversion":"1.0","id":"e1","source":"/etl","type":"com.example.ready","subject":"day-1","data":{"x":1}}`,
			wantID:  "/etl e1", wantKey: "day-1", wantWorkspace: "vision", wantType: "com.example.ready",
		},
		"cloudevent without source": {
			subject: "dlc.vision.trigger.retrain",
			data:    `{"specversion":"1.0","id":"e1","type":"t"}`,
			wantID:  "e1", wantWorkspace: "vision", wantType: "t",
		},
		"s3 record": {
			subject: "dlc.vision.s3.events", data: versityRecord,
			wantID: `s3://datasets/clicks/a.csv etag="0cc175b9" sequencer=1A`, wantKey: "clicks/a.csv",
			wantWorkspace: "vision", wantType: "s3:ObjectCreated:Put",
		},
		"gateway test event": {
			subject: "dlc.vision.s3.events", data: `{"Service":"S3","Event":"s3:TestEvent","Bucket":"Test-Bucket"}`,
			wantErr: triggers.ErrNoEventID,
		},
		"cloudevent without id": {
			subject: "dlc.vision.trigger.x", data: `{"specversion":"1.0","type":"t"}`, wantErr: triggers.ErrNoEventID,
		},
		"not json":   {subject: "dlc.vision.trigger.x", data: `hello`, wantErr: triggers.ErrNoEventID},
		"not object": {subject: "dlc.vision.trigger.x", data: `[1]`, wantErr: triggers.ErrNoEventID},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ev, err := triggers.ParseEvent(tc.subject, []byte(tc.data))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []any{ev.ID, ev.Key, ev.Workspace, ev.Doc["type"]}
			want := []any{tc.wantID, tc.wantKey, tc.wantWorkspace, tc.wantType}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("id, key, workspace, type (-want +got):\n%s", diff)
			}
		})
	}
}

// The envelope of an S3 record keeps the notification under data, so that
// data.Records[0].s3.object.key works whatever the S3 server.
func TestParseEventS3Envelope(t *testing.T) {
	ev, err := triggers.ParseEvent("dlc.vision.s3.events", []byte(versityRecord))
	if err != nil {
		t.Fatal(err)
	}
	recs := ev.Doc["data"].(map[string]any)["Records"].([]any)
	key := recs[0].(map[string]any)["s3"].(map[string]any)["object"].(map[string]any)["key"]
	if key != "clicks/a.csv" || ev.Doc["subject"] != "dlc.vision.s3.events" || ev.Doc["id"] != ev.ID {
		t.Errorf("envelope = %v", ev.Doc)
	}
}
