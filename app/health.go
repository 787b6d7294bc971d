package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"
	"go.temporal.io/sdk/client"
)

// Health paths on the metrics listener (MetricsConfig): what a Kubernetes probe of a
// process without the API (`dlc worker`) asks. LivenessPath answers 200 while the
// process serves; ReadinessPath answers 200 only while the process's Temporal
// frontend answers a health check and its NATS connection is connected, and 503
// naming what is lost otherwise, so that a worker that lost Temporal or NATS is not
// ready.
const (
	LivenessPath  = "/healthz"
	ReadinessPath = "/readyz"
)

// readinessTimeout bounds the Temporal health check of one readiness request.
const readinessTimeout = 3 * time.Second

// addHealth adds LivenessPath and ReadinessPath to the metrics listener's mux.
func (p *Process) addHealth(mux *http.ServeMux) {
	mux.HandleFunc("GET "+LivenessPath, func(w http.ResponseWriter, _ *http.Request) {
		writeHealth(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET "+ReadinessPath, func(w http.ResponseWriter, r *http.Request) {
		problems := p.notReady(r.Context())
		if len(problems) > 0 {
			writeHealth(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "problems": problems})
			return
		}
		writeHealth(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// notReady says what of the process's connections is lost: "temporal: ..." when the
// frontend does not answer its health check, "nats: ..." when the connection is not
// connected (reconnecting, closed).
func (p *Process) notReady(ctx context.Context) []string {
	var problems []string
	if p.Temporal == nil {
		problems = append(problems, "temporal: not connected")
	} else {
		ctx, cancel := context.WithTimeout(ctx, readinessTimeout)
		defer cancel()
		if _, err := p.Temporal.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
			problems = append(problems, fmt.Sprintf("temporal: %v", err))
		}
	}
	if p.Events == nil {
		problems = append(problems, "nats: not connected")
	} else if st := p.Events.Conn().Status(); st != nats.CONNECTED {
		problems = append(problems, fmt.Sprintf("nats: connection %s", st))
	}
	return problems
}

func writeHealth(w http.ResponseWriter, code int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
