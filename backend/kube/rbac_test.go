package kube

import (
	"bytes"
	"context"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// The manifest the integration tests apply and operators install grants exactly
// PolicyRules.
func TestRBACManifest(t *testing.T) {
	data, err := os.ReadFile("../../deploy/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		kinds   []string
		role    rbacv1.ClusterRole
		binding rbacv1.ClusterRoleBinding
		sa      corev1.ServiceAccount
	)
	for doc := range bytes.SplitSeq(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, meta.Kind)
		var target any
		switch meta.Kind {
		case "ClusterRole":
			target = &role
		case "ClusterRoleBinding":
			target = &binding
		case "ServiceAccount":
			target = &sa
		default:
			continue
		}
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			t.Fatalf("%s: %v", meta.Kind, err)
		}
	}
	if diff := cmp.Diff([]string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"}, kinds); diff != "" {
		t.Errorf("documents (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(PolicyRules(), role.Rules); diff != "" {
		t.Errorf("deploy/rbac.yaml's rules differ from PolicyRules() (-want +got):\n%s", diff)
	}
	if role.Name != WorkerClusterRole || sa.Name != WorkerServiceAccount || sa.Namespace != WorkerNamespace {
		t.Errorf("role %q, service account %s/%s", role.Name, sa.Namespace, sa.Name)
	}
	wantBinding := rbacv1.ClusterRoleBinding{
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: WorkerClusterRole},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: WorkerServiceAccount, Namespace: WorkerNamespace}},
	}
	if diff := cmp.Diff(wantBinding.RoleRef, binding.RoleRef); diff != "" {
		t.Errorf("roleRef (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantBinding.Subjects, binding.Subjects); diff != "" {
		t.Errorf("subjects (-want +got):\n%s", diff)
	}
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
	eventually(t, "the node informer to sync (list and watch nodes)", func() bool {
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
