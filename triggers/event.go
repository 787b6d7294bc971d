package triggers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Event is an inbound message as triggers see it.
type Event struct {
	// ID identifies the event among every event of its subject; what a trigger starts
	// is named after it.
	ID string
	// Subject is the NATS subject it arrived on.
	Subject string
	// Workspace is the subject's workspace (its second token).
	Workspace string
	// Key is what the event is about, for the fired event: an S3 object's key, or a
	// CloudEvent's subject.
	Key string
	// Doc is the envelope filters and ${event.<path>} refer to, decoded into generic
	// values: the CloudEvent itself, or {"id", "subject", "type", "source", "data"}
	// around any other JSON document.
	Doc map[string]any
}

// ParseEvent reads an inbound message. A CloudEvent (an object with specversion and
// id) is its own envelope, and its id is "<source> <id>" (CloudEvents ids are unique per
// source). An S3 bucket notification ({"Records": [...]}, as AWS, MinIO and versitygw
// publish it) is wrapped as {"id", "subject", "type": the first record's eventName,
// "source": "s3", "data": the notification}, with an id made of each record's bucket,
// key, eTag and sequencer. Anything else wraps ErrNoEventID.
func ParseEvent(subject string, data []byte) (Event, error) {
	ev := Event{Subject: subject}
	if parts := strings.Split(subject, "."); len(parts) >= 3 && parts[0] == "dlc" {
		ev.Workspace = parts[1]
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return ev, fmt.Errorf("%w: not JSON: %w", ErrNoEventID, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return ev, fmt.Errorf("%w: not a JSON object", ErrNoEventID)
	}
	if spec, _ := obj["specversion"].(string); spec != "" {
		id, _ := obj["id"].(string)
		if id == "" {
			return ev, fmt.Errorf("%w: a CloudEvent without an id", ErrNoEventID)
		}
		source, _ := obj["source"].(string)
		ev.ID = id
		if source != "" {
			ev.ID = source + " " + id
		}
		ev.Key, _ = obj["subject"].(string)
		ev.Doc = obj
		return ev, nil
	}
	if records, ok := obj["Records"].([]any); ok && len(records) > 0 {
		ids := make([]string, 0, len(records))
		var typ string
		for i, r := range records {
			rec, _ := r.(map[string]any)
			s3, _ := rec["s3"].(map[string]any)
			bucket, _ := s3["bucket"].(map[string]any)
			object, _ := s3["object"].(map[string]any)
			name, _ := bucket["name"].(string)
			key, _ := object["key"].(string)
			if name == "" || key == "" {
				return ev, fmt.Errorf("%w: S3 record %d has no bucket name or object key", ErrNoEventID, i)
			}
			etag, _ := object["eTag"].(string)
			seq, _ := object["sequencer"].(string)
			ids = append(ids, fmt.Sprintf("s3://%s/%s etag=%s sequencer=%s", name, key, etag, seq))
			if i == 0 {
				ev.Key = key
				typ, _ = rec["eventName"].(string)
			}
		}
		ev.ID = strings.Join(ids, "\n")
		ev.Doc = map[string]any{"id": ev.ID, "subject": subject, "type": typ, "source": "s3", "data": obj}
		return ev, nil
	}
	return ev, fmt.Errorf("%w: neither a CloudEvent nor an S3 notification", ErrNoEventID)
}
