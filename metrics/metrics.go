// Package metrics holds a process's Prometheus metrics: the ones OpenDLC records itself
// (API requests, launches, log forwarding, notifications, jobs by phase) and the
// Temporal SDK's own client and worker metrics, which reach the same registry through
// the SDK's OpenTelemetry contrib and OpenTelemetry's Prometheus exporter. One Registry
// serves one process's /metrics (Handler). docs/metrics.md lists every metric.
//
// The recording methods are safe on a nil *Registry, where they do nothing, so the
// libraries that record (activities, notify, api/server) work without metrics.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.temporal.io/sdk/client"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
)

// Names of the metrics OpenDLC records through the Registry (the Temporal SDK's and the
// workflow-recorded ones are listed in docs/metrics.md).
const (
	APIRequests             = "opendlc_api_requests_total"
	APIRequestDuration      = "opendlc_api_request_duration_seconds"
	Launches                = "opendlc_launches_total"
	LaunchDuration          = "opendlc_launch_duration_seconds"
	LogLinesForwarded       = "opendlc_log_lines_forwarded_total"
	LogForwardLag           = "opendlc_log_forward_lag_seconds"
	JobPhaseTransitions     = "opendlc_job_phase_transitions_total"
	NotificationDeliveries  = "opendlc_notification_deliveries_total"
	NotificationDeadLetters = "opendlc_notification_dead_letters_total"
	Jobs                    = "opendlc_jobs"
	Workspaces              = "opendlc_workspaces"
	JobsScrapeErrors        = "opendlc_jobs_scrape_errors_total"
)

// temporalMeterName names the OpenTelemetry meter of the Temporal SDK's metrics.
const temporalMeterName = "temporal-sdk-go"

// scrapeTimeout bounds one scrape of the registry.
const scrapeTimeout = 10 * time.Second

// secondsBuckets are the histogram buckets of every duration, OpenDLC's and the
// Temporal SDK's: from 5 ms (an API call) to 30 minutes (a gang that waits for nodes).
var secondsBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800}

// Registry is one process's metrics. Make it with New; Close releases the Temporal
// meter.
type Registry struct {
	reg      *prometheus.Registry
	provider *sdkmetric.MeterProvider
	temporal client.MetricsHandler

	apiRequests    *prometheus.CounterVec
	apiDuration    *prometheus.HistogramVec
	launches       *prometheus.CounterVec
	launchDuration *prometheus.HistogramVec
	logLines       prometheus.Counter
	logLag         prometheus.Histogram
	phases         *prometheus.CounterVec
	deliveries     *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
}

// New returns a Registry with OpenDLC's metrics, the Go runtime and process
// collectors, and a Temporal metrics handler (TemporalHandler) that exports into it.
func New() (*Registry, error) {
	r := &Registry{reg: prometheus.NewRegistry()}
	r.apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: APIRequests, Help: "HTTP API requests by route pattern (method and path template) and status code.",
	}, []string{"route", "code"})
	r.apiDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: APIRequestDuration, Help: "HTTP API request duration by route pattern and status code.",
		Buckets: secondsBuckets,
	}, []string{"route", "code"})
	r.launches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Launches, Help: "Gang launches (LaunchGang activity runs) by backend and result (ok, error).",
	}, []string{"backend", "result"})
	r.launchDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: LaunchDuration, Help: "Time to create a gang's replicas on the backend, by backend.",
		Buckets: secondsBuckets,
	}, []string{"backend"})
	r.logLines = prometheus.NewCounter(prometheus.CounterOpts{
		Name: LogLinesForwarded, Help: "Replica log lines published to the log stream.",
	})
	r.logLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: LogForwardLag, Help: "Time from a log line's timestamp to its publication on the log stream.",
		Buckets: secondsBuckets,
	})
	r.phases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: JobPhaseTransitions, Help: "Job phase changes published, by workspace and the phase entered.",
	}, []string{"workspace", "phase"})
	r.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NotificationDeliveries, Help: "Notification delivery attempts by target (webhook, email, subject) and result (delivered, failed).",
	}, []string{"target", "result"})
	r.deadLetters = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: NotificationDeadLetters, Help: "Notifications dead-lettered after their last attempt, by target.",
	}, []string{"target"})
	for _, c := range []prometheus.Collector{
		r.apiRequests, r.apiDuration, r.launches, r.launchDuration, r.logLines, r.logLag,
		r.phases, r.deliveries, r.deadLetters,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		if err := r.reg.Register(c); err != nil {
			return nil, err
		}
	}
	if err := r.startTemporal(); err != nil {
		return nil, err
	}
	return r, nil
}

// startTemporal makes the Temporal SDK's metrics handler: the SDK's OpenTelemetry
// contrib on a meter whose reader is OpenTelemetry's Prometheus exporter, registered
// on this registry. Every instrument gets help text (helpView), and durations get secondsBuckets (OpenTelemetry's default buckets
// suit milliseconds, and the SDK records seconds).
func (r *Registry) startTemporal() error {
	exp, err := otelprom.New(
		otelprom.WithRegisterer(r.reg),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
		otelprom.WithAggregationSelector(func(k sdkmetric.InstrumentKind) sdkmetric.Aggregation {
			if k == sdkmetric.InstrumentKindHistogram {
				return sdkmetric.AggregationExplicitBucketHistogram{Boundaries: secondsBuckets}
			}
			return sdkmetric.DefaultAggregationSelector(k)
		}),
	)
	if err != nil {
		return err
	}
	r.provider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp), sdkmetric.WithView(helpView))
	r.temporal = temporalotel.NewMetricsHandler(temporalotel.MetricsHandlerOptions{
		Meter:                r.provider.Meter(temporalMeterName),
		UseMonotonicCounters: true,
		// A meter error (an instrument name reused with another kind) must not stop
		// a worker: the metric is dropped instead.
		OnError: func(error) {},
	})
	return nil
}

// TemporalHandler is the metrics handler for the Temporal client
// (client.Options.MetricsHandler); workers made from the client inherit it.
func (r *Registry) TemporalHandler() client.MetricsHandler {
	if r == nil {
		return nil
	}
	return r.temporal
}

// Register adds a collector (the jobs collector of an API process).
func (r *Registry) Register(c prometheus.Collector) error { return r.reg.Register(c) }

// Gatherer gathers every metric of the registry.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry in the Prometheus text format (or OpenMetrics when the
// scraper asks for it).
func (r *Registry) Handler() http.Handler {
	return promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		Registry: r.reg, EnableOpenMetrics: true, Timeout: scrapeTimeout,
	})
}

// Close stops the Temporal meter provider.
func (r *Registry) Close(ctx context.Context) error {
	if r == nil || r.provider == nil {
		return nil
	}
	return r.provider.Shutdown(ctx)
}

// APIRequest records one API request: its route pattern ("GET /v1/..."; "unmatched"
// for none), status code and duration.
func (r *Registry) APIRequest(route string, code int, d time.Duration) {
	if r == nil {
		return
	}
	c := strconv.Itoa(code)
	r.apiRequests.WithLabelValues(route, c).Inc()
	r.apiDuration.WithLabelValues(route, c).Observe(d.Seconds())
}

// Launch records one gang launch on a backend, how long it took and whether it failed.
func (r *Registry) Launch(backend string, d time.Duration, err error) {
	if r == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	r.launches.WithLabelValues(backend, result).Inc()
	if err == nil {
		r.launchDuration.WithLabelValues(backend).Observe(d.Seconds())
	}
}

// LogLineForwarded records one log line published, written by the replica at written
// (zero when unknown: no lag is recorded).
func (r *Registry) LogLineForwarded(written, published time.Time) {
	if r == nil {
		return
	}
	r.logLines.Inc()
	if !written.IsZero() {
		r.logLag.Observe(max(published.Sub(written), 0).Seconds())
	}
}

// JobPhase records a job entering a phase (a phase event published).
func (r *Registry) JobPhase(workspace, phase string) {
	if r == nil {
		return
	}
	r.phases.WithLabelValues(workspace, phase).Inc()
}

// NotificationDelivery records one delivery attempt to a target (webhook, email, subject).
func (r *Registry) NotificationDelivery(target string, err error) {
	if r == nil {
		return
	}
	result := "delivered"
	if err != nil {
		result = "failed"
	}
	r.deliveries.WithLabelValues(target, result).Inc()
}

// NotificationDeadLetter records a delivery dead-lettered.
func (r *Registry) NotificationDeadLetter(target string) {
	if r == nil {
		return
	}
	r.deadLetters.WithLabelValues(target).Inc()
}
