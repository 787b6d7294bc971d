package notify

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/events"
)

// TestAlertMessage: an alert event's title, plain text (e-mail) and chat facts name the
// rule, the job, the state and the condition, and link to the job.
func TestAlertMessage(t *testing.T) {
	at := time.Date(2026, 12, 7, 3, 15, 0, 0, time.UTC)
	v, th := 3.5, 10.0
	ev, err := events.New("alert:vision:idle-gpu:resnet:1:firing", events.TypeAlert, "vision", "/src", "resnet", at,
		events.AlertData{Rule: "idle-gpu", Job: "resnet", Metric: "gpu.utilization", State: "firing", Condition: "below 10 for 15m0s",
			Value: &v, Threshold: &th, Since: at.Add(-15 * time.Minute), Message: "gpu.utilization below 10 for 15m0s (last 3.5) since 2026-12-07T03:00:00Z"})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	pe, err := parseEvent("dlc.vision.alert.idle-gpu", raw)
	if err != nil {
		t.Fatal(err)
	}
	m := message(pe, "https://dlc.example.com")
	wantTitle := "Alert idle-gpu firing: job resnet gpu.utilization below 10 for 15m0s (last 3.5) since 2026-12-07T03:00:00Z"
	if m.Title != wantTitle || m.Link != "https://dlc.example.com/ui/ws/vision/jobs/resnet" {
		t.Errorf("title %q, link %q", m.Title, m.Link)
	}
	for _, line := range []string{"rule: idle-gpu\n", "job: resnet\n", "state: firing\n", "time: 2026-12-07 03:15:00 UTC\n"} {
		if !strings.Contains(m.Text, line) {
			t.Errorf("text lacks %q:\n%s", line, m.Text)
		}
	}
	var got []string
	for _, f := range facts(m) {
		got = append(got, f[0]+"="+f[1])
	}
	want := []string{"Workspace=vision", "Rule=idle-gpu", "Job=resnet", "State=firing",
		"Message=gpu.utilization below 10 for 15m0s (last 3.5) since 2026-12-07T03:00:00Z", "Time=2026-12-07 03:15:00 UTC"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chat facts (-want +got):\n%s", diff)
	}
}
