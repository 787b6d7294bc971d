package main

import "testing"

// dlc validate prints the type mistakes (a bad quantity, a bad duration, a string for a
// number, an unknown field) and the semantic ones of a document together.
func TestValidatePrintsTypeAndSemanticErrors(t *testing.T) {
	checkValidateFails(t, writeDoc(t, `apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: Bad_Name}
spec:
  framework: pytorh
  command: [train]
  roles: {worker: {replicas: 0, resources: {cpu: lots}}, master: {replicas: one}}
  timeout: 2 days
  tiemout: 1h
`), []string{"metadata.name", "spec.framework", "spec.roles.master.replicas", "spec.roles.worker.replicas",
		"spec.roles.worker.resources.cpu", "spec.tiemout", "spec.timeout"})
}
