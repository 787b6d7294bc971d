package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/app"
)

// registerMetricsAddr adds --metrics-addr: where the process serves /metrics
// (Prometheus text format, plain HTTP, no authentication; default def: "" does not
// serve them).
func registerMetricsAddr(fs *pflag.FlagSet, addr *string, def string) {
	fs.StringVar(addr, "metrics-addr", def,
		"serve Prometheus metrics on this address at "+app.MetricsPath+" (plain HTTP, no authentication: keep it inside the cluster network; default: not served)")
}

// metricsConfig serves the metrics on addr; nil (not served) when addr is "".
func metricsConfig(addr string) *app.MetricsConfig {
	if addr == "" {
		return nil
	}
	return &app.MetricsConfig{Addr: addr}
}

// printMetricsURL prints where the process serves its metrics, if it does.
func printMetricsURL(w io.Writer, p *app.Process) {
	if p.MetricsURL != "" {
		fmt.Fprintf(w, "metrics on %s\n", p.MetricsURL)
	}
}
