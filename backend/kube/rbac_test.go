package kube

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/internal/testutil"
)

// manifestObject is one document of a deploy/ manifest.
type manifestObject struct {
	Kind     string
	Metadata struct{ Name, Namespace string }
	Rules    []rbacv1.PolicyRule
	RoleRef  rbacv1.RoleRef
	Subjects []rbacv1.Subject
}

func readManifest(t *testing.T, path string) []manifestObject {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []manifestObject
	for doc := range bytes.SplitSeq(data, []byte("\n---\n")) {
		var o manifestObject
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// checkManifest checks that path holds exactly the objects want names (kind/namespace/name,
// in order), that each role's rules are rules[its name], and that every binding binds
// its own role to the worker's service account.
func checkManifest(t *testing.T, path string, want []string, rules map[string][]rbacv1.PolicyRule) {
	t.Helper()
	objs := readManifest(t, path)
	var got []string
	for _, o := range objs {
		got = append(got, o.Kind+"/"+o.Metadata.Namespace+"/"+o.Metadata.Name)
		switch o.Kind {
		case "ClusterRole", "Role":
			if diff := cmp.Diff(rules[o.Kind+"/"+o.Metadata.Name], o.Rules); diff != "" {
				t.Errorf("%s: %s %s's rules (-want +got):\n%s", path, o.Kind, o.Metadata.Name, diff)
			}
		case "ClusterRoleBinding", "RoleBinding":
			role := strings.TrimSuffix(o.Kind, "Binding")
			wantRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: role, Name: o.Metadata.Name}
			if diff := cmp.Diff(wantRef, o.RoleRef); diff != "" {
				t.Errorf("%s: %s %s's roleRef (-want +got):\n%s", path, o.Kind, o.Metadata.Name, diff)
			}
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: WorkerServiceAccount, Namespace: WorkerNamespace}}
			if diff := cmp.Diff(wantSubjects, o.Subjects); diff != "" {
				t.Errorf("%s: %s %s's subjects (-want +got):\n%s", path, o.Kind, o.Metadata.Name, diff)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: documents (-want +got):\n%s", path, diff)
	}
}

// The manifests the integration tests apply and operators install grant exactly
// PolicyRules: cluster-wide in rbac.yaml, split by scope in rbac-namespaced.yaml.
func TestRBACManifest(t *testing.T) {
	clusterRole := append(append(NamespaceRules(), NamespaceCreateRules()...), NodeReadRules()...)
	if diff := cmp.Diff(PolicyRules(), append(slices.Clone(clusterRole), NodeHealthRules()...)); diff != "" {
		t.Errorf("PolicyRules is not the union of the parts (-want +got):\n%s", diff)
	}
	checkManifest(t, "../../deploy/rbac.yaml", []string{
		"Namespace//" + WorkerNamespace,
		"ServiceAccount/" + WorkerNamespace + "/" + WorkerServiceAccount,
		"ClusterRole//" + WorkerClusterRole,
		"ClusterRoleBinding//" + WorkerClusterRole,
		"ClusterRole//" + WorkerNodeHealthClusterRole,
		"ClusterRoleBinding//" + WorkerNodeHealthClusterRole,
	}, map[string][]rbacv1.PolicyRule{
		"ClusterRole/" + WorkerClusterRole:           clusterRole,
		"ClusterRole/" + WorkerNodeHealthClusterRole: NodeHealthRules(),
	})
	checkManifest(t, "../../deploy/rbac-namespaced.yaml", []string{
		"Namespace//" + WorkerNamespace,
		"ServiceAccount/" + WorkerNamespace + "/" + WorkerServiceAccount,
		"Role/team-a/" + WorkerRole,
		"RoleBinding/team-a/" + WorkerRole,
		"ClusterRole//" + WorkerNodesClusterRole,
		"ClusterRoleBinding//" + WorkerNodesClusterRole,
		"ClusterRole//" + WorkerNodeHealthClusterRole,
		"ClusterRoleBinding//" + WorkerNodeHealthClusterRole,
		"Role/" + WorkerNamespace + "/" + WorkerRole,
		"RoleBinding/" + WorkerNamespace + "/" + WorkerRole,
	}, map[string][]rbacv1.PolicyRule{
		"Role/" + WorkerRole:                         NamespaceRules(),
		"ClusterRole/" + WorkerNodesClusterRole:      NodeReadRules(),
		"ClusterRole/" + WorkerNodeHealthClusterRole: NodeHealthRules(),
	})
}

// deploy/rbac-node-stats.yaml grants exactly NodeStatsRules, apart from rbac.yaml.
func TestNodeStatsRBACManifest(t *testing.T) {
	checkManifest(t, "../../deploy/rbac-node-stats.yaml", []string{
		"ClusterRole//" + WorkerNodeStatsClusterRole,
		"ClusterRoleBinding//" + WorkerNodeStatsClusterRole,
	}, map[string][]rbacv1.PolicyRule{
		"ClusterRole/" + WorkerNodeStatsClusterRole: NodeStatsRules(),
	})
}

// Every request the backend makes through a whole life cycle (informers, Launch twice,
// of a pytorch and an MPI gang,
// Observe, FollowLogs, Stop, Cleanup, with and without a cache, then a node health
// check that quarantines a node and a re-check that releases it) is allowed by
// PolicyRules, and every permission granted is used.
func TestPolicyRulesCoverEveryRequest(t *testing.T) {
	cs := newClient()
	(&fakeLogs{text: "2026-05-01T10:00:00Z hello\n"}).install(cs)
	ctx := context.Background()
	s3 := WithS3Credentials(StaticS3Credentials(S3Credentials{Endpoint: "http://s3:9000", AccessKeyID: "k", SecretAccessKey: "s"}))
	withCache := newBackend(t, cs, s3)
	noCache := newUncachedBackend(t, cs, s3)
	noCache.Close() // its informers never start: every read goes to the API server

	g := gangOf(t, ddp("resnet"))
	launch(t, withCache, g)
	waitSynced(t, withCache)
	launch(t, noCache, g) // AlreadyExists: reads the existing objects back
	// An MPI gang adds its ConfigMap and ssh Secret, created twice too.
	mpi := gangOf(t, mpiJob("allreduce"))
	launch(t, withCache, mpi)
	launch(t, noCache, mpi)
	observe(t, withCache, g.GangRef)
	testutil.Eventually(t, 10*time.Second, "the node informer to sync (list and watch nodes)", func() bool {
		withCache.nodes.start()
		return withCache.nodes.nodes != nil && withCache.nodes.nodes.HasSynced()
	})
	observe(t, noCache, g.GangRef)
	setPodStatus(t, cs, "vision", "resnet-master-0-a1", corev1.PodStatus{Phase: corev1.PodSucceeded}, "node-a")
	// A log that cannot be read leaves a gap record and an event.
	(&fakeLogs{fail: true}).install(cs)
	if _, err := follow(noCache, g.GangRef, "resnet-master-0-a1", 0)(t); err != nil {
		t.Fatal(err)
	}
	if err := withCache.Stop(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
	if err := withCache.Cleanup(ctx, g.GangRef); err != nil {
		t.Fatal(err)
	}
	checkAndRecheckNodes(t, cs, withCache)

	used := map[string]bool{}
	for _, a := range cs.Actions() {
		res := a.GetResource()
		name := res.Resource
		if a.GetSubresource() != "" {
			name += "/" + a.GetSubresource()
		}
		verb := a.GetVerb()
		if verb == "update" && name == "pods" {
			continue // the test playing kubelet
		}
		if !allowed(PolicyRules(), res.Group, name, verb) {
			t.Errorf("%s %s (group %q) is not allowed by PolicyRules", verb, name, res.Group)
		}
		used[verb+" "+name] = true
	}
	for _, r := range PolicyRules() {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if !used[v+" "+res] && res != "services/finalizers" {
					t.Errorf("%s %s is granted but never used", v, res)
				}
			}
		}
	}
}

func allowed(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) {
			return true
		}
	}
	return false
}
