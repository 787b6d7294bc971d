// Package backend defines where a job's replicas run: the Backend interface
// (launch, observe, stop and clean up a gang, and follow a replica's logs), the
// gang and node-health types it speaks in, and BuildGang, which turns a
// TrainingJob attempt into a gang. Its implementations are backend/local
// (processes on the worker's host) and backend/kube (pods). Backends return
// plain sentinel errors such as ErrGangNotFound and ErrInvalidSpec; turning them
// into Temporal errors is the activities' job.
package backend
