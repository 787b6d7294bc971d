package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/notify"
)

// Issue 33, finding 9: dead letters showed the internal resolver's address ("lookup x
// on 10.255.255.53:53"). A rule whose webhook host does not resolve is dead-lettered
// naming the host, without the resolver.
func TestDeadLetterWithoutResolverOnRealStack(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	ws := workspace(t)
	if _, err := env.api.ApplyRule(ctx, fmt.Appendf(nil, `
apiVersion: opendlc.io/v1alpha1
kind: NotificationRule
metadata: {name: nowhere, workspace: %s}
spec:
  match: {types: [opendlc.job.phase.v1], phases: [Succeeded]}
  webhook: {url: "http://nosuch-host.invalid/hook", secret: "0123456789abcdef0123456789abcdef"}
  delivery: {maxAttempts: 1}
`, ws)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.api.DeleteRule(context.Background(), ws, "nowhere") })
	runJob(t, ctx, ws, "ok", `
  framework: custom
  command: [sh, -c, "true"]
  roles: {worker: {replicas: 1}}
`)
	var dl notify.DeadLetter
	var raw string
	testutil.Eventually(t, itest.Left(ctx), "the dead letter", func() bool {
		data, err := env.events.LastMsg(ctx, jetstream.NotifyStream, "dlc."+ws+".notify.deadletter")
		if err != nil || data == nil {
			return false
		}
		raw = string(data)
		return json.Unmarshal(data, &dl) == nil
	}, itest.PollInterval)
	t.Logf("dead letter error: %s", dl.Error)
	if !strings.Contains(dl.Error, "nosuch-host.invalid") || dl.Workspace != ws {
		t.Errorf("dead letter %+v: want it to name the host", dl)
	}
	resolv, _ := os.ReadFile("/etc/resolv.conf")
	for line := range strings.Lines(string(resolv)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" && strings.Contains(raw, f[1]) {
			t.Errorf("the dead letter shows the resolver %s: %s", f[1], raw)
		}
	}
	if strings.Contains(dl.Error, ":53") {
		t.Errorf("the dead letter error shows a resolver's port: %q", dl.Error)
	}
}
