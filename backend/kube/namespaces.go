package kube

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/opendlc/opendlc/backend"
)

// Namespaces. A gang runs in the namespace its GangRef names (the workspace's
// configured namespace, which the job's workflow read from the workspace registry when
// the job started); a gang whose ref names none (a job started before the registry was
// read, or a workspace that is not registered) runs in the namespace its workspace maps
// to: WithNamespacePrefix's prefix + the workspace's name. A registered namespace equal
// to the workspace's own name is the registry's default and maps the same way, so a
// prefix keeps applying to workspaces created without an explicit namespace.
//
// Two modes of RBAC (deploy/rbac.yaml, deploy/rbac-namespaced.yaml):
//
//   - cluster-wide (the default): the worker may create namespaces and watches
//     OpenDLC's pods and services in every namespace with one informer pair;
//   - namespaced (WithNamespaces): the worker holds a Role in each of its namespaces
//     only. It never creates a namespace, watches each of its namespaces with its own
//     informers, and refuses a gang whose namespace is not one of them, before any
//     request. Only nodes are read cluster-wide (a ClusterRole), and patched only when
//     node health checks are on (WithHealthChecks).

// WithNamespaces runs the worker in namespaced mode: gangs may run only in these
// namespaces, which an administrator creates (namespace creation is off), and the
// informers watch each of them instead of the whole cluster. With node health checks
// on, the namespace of the re-check pods (WithHealthNamespace) is watched too and needs
// the same Role. Default: none (cluster-wide mode).
func WithNamespaces(namespaces ...string) Option {
	return func(b *Backend) error {
		for _, ns := range namespaces {
			if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
				return fmt.Errorf("kube: namespace %q: %s", ns, strings.Join(errs, "; "))
			}
			if !slices.Contains(b.onlyNamespaces, ns) {
				b.onlyNamespaces = append(b.onlyNamespaces, ns)
			}
		}
		return nil
	}
}

// WithHealthChecks says whether node health checks run: pre-flight check pods,
// quarantine of failed nodes (a patch of the node) and re-checks. Off, the worker needs
// no patch on nodes: a job's check (spec.healthCheck) refuses to run, saying checks are
// off, and the job launches without it; re-checks do nothing. Default: true.
func WithHealthChecks(enabled bool) Option {
	return func(b *Backend) error {
		b.healthOff = !enabled
		return nil
	}
}

// errHealthChecksOff answers a job's node health check when checks are off.
var errHealthChecksOff = backend.InvalidSpec(errors.New("kube: node health checks are off on this worker " +
	"(--health-checks=false): remove spec.healthCheck, or run the job where checks are on"))

// Namespaced reports whether the backend runs in namespaced mode (WithNamespaces).
func (b *Backend) Namespaced() bool { return len(b.onlyNamespaces) > 0 }

// HealthChecks reports whether node health checks are on (WithHealthChecks).
func (b *Backend) HealthChecks() bool { return !b.healthOff }

// namespaceOf is the namespace of a gang: the one its ref names, else the one its
// workspace maps to.
func (b *Backend) namespaceOf(ref backend.GangRef) string {
	if ref.Namespace != "" && ref.Namespace != ref.Workspace {
		return ref.Namespace
	}
	return b.namespace(ref.Workspace)
}

// mayUse reports whether the worker may use namespace ns: always in cluster-wide
// mode, only its own in namespaced mode. Stop, Cleanup, Observe and FollowLogs of a gang
// elsewhere make no request: Launch created nothing there.
func (b *Backend) mayUse(ns string) bool {
	return !b.Namespaced() || slices.Contains(b.onlyNamespaces, ns)
}

// allowNamespace refuses, in namespaced mode, a namespace the worker holds no Role in.
func (b *Backend) allowNamespace(ns string) error {
	if b.mayUse(ns) {
		return nil
	}
	return backend.InvalidSpec(fmt.Errorf("kube: namespace %s is not one of the worker's namespaces (%s): "+
		"add it to the worker's --kube-namespace and grant it the Role of deploy/rbac-namespaced.yaml",
		ns, strings.Join(b.onlyNamespaces, ", ")))
}

// watchedNamespaces are the namespaces the informers watch: nil (all) in cluster-wide
// mode; in namespaced mode the worker's namespaces, and the health namespace when
// health checks are on.
func (b *Backend) watchedNamespaces() []string {
	if !b.Namespaced() {
		return nil
	}
	ns := slices.Clone(b.onlyNamespaces)
	if b.HealthChecks() && !slices.Contains(ns, b.healthNamespace()) {
		ns = append(ns, b.healthNamespace())
	}
	return ns
}

// listNamespaces are the namespaces to list in: metav1.NamespaceAll in cluster-wide
// mode, else each watched namespace.
func (b *Backend) listNamespaces() []string {
	if ns := b.watchedNamespaces(); ns != nil {
		return ns
	}
	return []string{metav1.NamespaceAll}
}
