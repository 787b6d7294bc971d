package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/internal/testutil"
)

// A process's readiness (what the chart's worker probe asks) follows its connections:
// ready with a real Temporal and NATS, not ready naming NATS once the NATS server is
// gone, and naming Temporal too once the Temporal server is gone, while liveness still
// answers.
func TestReadinessFollowsTemporalAndNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	temporal, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer temporal.Close()
	ns, err := devstack.StartNATS(ctx, devstack.NATSOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	p, err := app.Start(ctx, app.Config{
		TemporalAddress: temporal.Address, Namespace: temporal.Namespace, NATSURL: ns.URL,
		Metrics: &app.MetricsConfig{Addr: "127.0.0.1:0"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base := strings.TrimSuffix(p.MetricsURL, app.MetricsPath)

	get := func(path string) (int, string, error) {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+path, nil)
		if err != nil {
			return 0, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	// waitFor waits until path answers code with a body containing each of want.
	waitFor := func(path string, code int, want ...string) {
		t.Helper()
		testutil.Eventually(t, time.Minute, fmt.Sprintf("GET %s answers %d with %q", path, code, want), func() error {
			got, body, err := get(path)
			if err != nil {
				return err
			}
			if got != code {
				return fmt.Errorf("status %d, body %s", got, body)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					return fmt.Errorf("body %s lacks %q", body, w)
				}
			}
			return nil
		}, 200*time.Millisecond)
	}

	waitFor(app.ReadinessPath, http.StatusOK, `"ok"`)
	waitFor(app.LivenessPath, http.StatusOK, `"ok"`)

	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	// The fault happened: the process's own connection is no longer connected.
	testutil.Eventually(t, time.Minute, "the process's NATS connection leaves CONNECTED", func() bool {
		return !p.Events.Conn().IsConnected()
	})
	waitFor(app.ReadinessPath, http.StatusServiceUnavailable, "nats: connection")
	waitFor(app.LivenessPath, http.StatusOK, `"ok"`)

	if err := temporal.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(app.ReadinessPath, http.StatusServiceUnavailable, "nats: connection", "temporal: ")
	waitFor(app.LivenessPath, http.StatusOK, `"ok"`)
}
