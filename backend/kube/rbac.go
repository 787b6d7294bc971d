package kube

import rbacv1 "k8s.io/api/rbac/v1"

// Names of the worker's RBAC objects in deploy/rbac.yaml.
const (
	// WorkerServiceAccount is the service account the worker runs as.
	WorkerServiceAccount = "opendlc-worker"
	// WorkerNamespace is the namespace of WorkerServiceAccount.
	WorkerNamespace = "opendlc-system"
	// WorkerClusterRole is the cluster role bound to WorkerServiceAccount.
	WorkerClusterRole = "opendlc-worker"
)

// PolicyRules are every permission the backend uses, and no more: the rules of
// deploy/rbac.yaml's ClusterRole (a test keeps the two equal, and another checks that
// every request the backend makes is allowed by them). Cluster-wide, because workspaces
// map to namespaces created on demand, and the informers watch all of them at once.
//
// Not granted, because not used: patch on pods (the stopped mark lives on the Service),
// get on namespaces (Launch creates and treats AlreadyExists as success), update
// and delete on nodes (health checks list them when they run and patch them to
// quarantine or release; Observe watches them to see lost nodes), reading
// secrets (the kubelet, not the worker, reads the Secret named by WithEnvFromSecret and
// the gang's ssh Secret, which the worker only creates; the one Secret it patches is the
// S3 Secret whose contents it writes itself), and deletecollection.
func PolicyRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		// A Warning event on a pod whose log could not be read in full (a log gap).
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "watch", "create", "delete", "patch"}},
		// Pods name their Service as owner with blockOwnerDeletion, which clusters
		// running the OwnerReferencesPermissionEnforcement admission plugin allow only
		// to those who may update the owner's finalizers.
		{APIGroups: []string{""}, Resources: []string{"services/finalizers"}, Verbs: []string{"update"}},
		// A gang's framework files (MPI's hostfile) and its ssh key pair, owned by its
		// Service: created, never read.
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create"}},
		// Only with WithS3Credentials: each workspace namespace's S3 Secret, written by
		// server-side apply (a patch, which creates it when missing).
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{S3SecretName}, Verbs: []string{"patch"}},
		// Only with WithCreateNamespaces(true), the default.
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
		// Node health checks: the candidate and quarantined nodes are listed, and a
		// node is read then patched (taint, label, annotations) to quarantine or
		// release it. Observe watches nodes to fail the replicas of a node that stops
		// reporting at once.
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
	}
}
