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
	// WorkerNodeHealthClusterRole is the cluster role that lets the worker patch
	// nodes; bind it only where node health checks are on.
	WorkerNodeHealthClusterRole = "opendlc-worker-node-health"
	// WorkerNodesClusterRole is namespaced mode's cluster role: read nodes.
	WorkerNodesClusterRole = "opendlc-worker-nodes"
	// WorkerRole is namespaced mode's role in each namespace the worker uses.
	WorkerRole = "opendlc-worker"
)

// PolicyRules are every permission the backend uses, and no more: the union of the
// rules of deploy/rbac.yaml's ClusterRoles (a test keeps the two equal, and another
// checks that every request the backend makes is allowed by them). Cluster-wide mode:
// workspaces map to namespaces created on demand, and the informers watch all of them
// at once. deploy/rbac-namespaced.yaml grants the same rules split by scope:
// NamespaceRules in a Role per namespace, NodeReadRules and NodeHealthRules in
// ClusterRoles, and no NamespaceCreateRules.
//
// Not granted, because not used: patch on pods (the stopped mark lives on the Service),
// get on namespaces (Launch creates and treats AlreadyExists as success), update
// and delete on nodes (health checks list them when they run and patch them to
// quarantine or release; Observe watches them to see lost nodes), reading
// secrets (the kubelet, not the worker, reads the Secret named by WithEnvFromSecret and
// the gang's ssh Secret, which the worker only creates; the one Secret it patches is the
// S3 Secret whose contents it writes itself), and deletecollection.
func PolicyRules() []rbacv1.PolicyRule {
	rules := NamespaceRules()
	rules = append(rules, NamespaceCreateRules()...)
	rules = append(rules, NodeReadRules()...)
	return append(rules, NodeHealthRules()...)
}

// NamespaceRules are what the backend does inside a namespace it runs gangs (and node
// health check pods) in.
func NamespaceRules() []rbacv1.PolicyRule {
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
	}
}

// NamespaceCreateRules let Launch create a workspace's namespace: only with
// WithCreateNamespaces(true), the default of cluster-wide mode.
func NamespaceCreateRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
	}
}

// NodeReadRules let Observe watch nodes, to fail the replicas of a node that stops
// reporting at once, and health checks list the candidate and quarantined nodes and
// read one before patching it. Nodes are cluster-scoped: a ClusterRole in both modes.
func NodeReadRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
	}
}

// NodeHealthRules let node health checks quarantine a node and release it (a patch of
// its taint, label and annotations): only with WithHealthChecks(true), the default.
func NodeHealthRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch"}},
	}
}

// WorkerNodeStatsClusterRole is the cluster role that lets the worker read the kubelets'
// statistics (deploy/rbac-node-stats.yaml); bind it only with WithNodeStats.
const WorkerNodeStatsClusterRole = "opendlc-worker-node-stats"

// NodeStatsRules let WithNodeStats read a node's statistics summary through the API
// server's node proxy. Not in PolicyRules: get on nodes/proxy reaches every endpoint
// of every kubelet the API server proxies to, more than a worker needs otherwise, so
// it is granted apart, where an operator chooses resource sampling on Kubernetes.
func NodeStatsRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes/proxy"}, Verbs: []string{"get"}},
	}
}
