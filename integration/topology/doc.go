// Package topology tests OpenDLC on a production topology on one machine: the Temporal
// server (not the dev server) on PostgreSQL, a three-server NATS JetStream cluster with
// every stream replicated three times, the S3 gateway, and two API servers and two
// workers as separate `dlc server` and `dlc worker` processes. A job, an experiment and
// a schedule run to completion while one NATS server, one worker and one API server are
// killed and restarted, and nothing is lost or duplicated. docs/production.md describes
// the topology and quotes the wall times the test logs.
package topology
