package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/opendlc/opendlc/app"
)

// registerMetricsAddr adds --metrics-addr: where the process serves /metrics
// (Prometheus text format, plain HTTP, no authentication; default $DLC_METRICS_ADDR,
// else not served).
func registerMetricsAddr(cmd *cobra.Command, addr *string) {
	cmd.Flags().StringVar(addr, "metrics-addr", os.Getenv("DLC_METRICS_ADDR"),
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
