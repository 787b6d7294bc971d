package activities

import (
	"context"
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
	"github.com/opendlc/opendlc/schemas"
)

// LogProgressInput names the replicas of an attempt whose forwarded log to measure.
type LogProgressInput struct {
	Ref      backend.GangRef         `json:"ref"`
	UID      string                  `json:"uid"`
	Replicas []schemas.ReplicaStatus `json:"replicas"`
}

// LogProgress answers how far the forwarded log of an attempt has come: the sum, over
// its replicas, of the line number (LogRecord.Seq) of the newest record the log stream
// holds for the replica in this run and attempt. A finished job whose forwarder is still
// sending (one taken over from a dead worker, catching up) is waited for while this
// grows (the job workflow's log drain).
func (a *JobActivities) LogProgress(ctx context.Context, in LogProgressInput) (int64, error) {
	var sum int64
	for i, r := range in.Replicas {
		if i%100 == 99 && activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx, i) // one lookup per replica: a large gang takes a while
		}
		subject := events.JobLogSubject(in.Ref.Workspace, in.Ref.Job, r.Role, r.Index)
		data, err := a.Publisher.LastMsg(ctx, a.LogStream, subject)
		if err != nil {
			return 0, fmt.Errorf("log progress of %s: %w", r.Name, err)
		}
		var last events.LogRecord
		if data == nil || json.Unmarshal(data, &last) != nil {
			continue
		}
		if last.UID == in.UID && last.Attempt == in.Ref.Attempt {
			sum += last.Seq
		}
	}
	return sum, nil
}
