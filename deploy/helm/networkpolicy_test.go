package helm

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
)

// TestNetworkPolicies renders the chart's NetworkPolicies (namespaced mode with two
// workspace namespaces, and cluster mode, whose workspace namespaces the worker makes
// and labels; Temporal and NATS in namespaces of their own), applies them to the test
// control plane with strict validation, reads them back from the API server, and
// evaluates them, by the NetworkPolicy API's rules, for the connections that matter:
// a training pod reaches its gang's peers, DNS, S3, the API's port and the internet,
// but not Temporal, NATS, /metrics of the API server and the worker, another
// workspace's pods, private addresses or the cloud's metadata; OpenDLC's pods reach
// Temporal and NATS; Temporal's and NATS's own pods reach each other; Prometheus
// reaches /metrics.
//
// What this shows and what it cannot: the objects are valid, stored as written, and
// say the above. Nothing here enforces them: kubestack's control plane has kwok nodes
// and its real nodes use the bridge CNI, neither of which implements NetworkPolicy, so
// no packet is dropped by them in any test of this repository. On a cluster whose
// network plugin enforces NetworkPolicy (Calico, Cilium, ...), these are the rules it
// applies; that is not tested here.
func TestNetworkPolicies(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namespaced bool
	}{{"np-namespaced", true}, {"np-cluster", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := itest.Context(t, 3*time.Minute)
			release, ns := tc.name, "chart-"+tc.name
			// A workspace namespace in cluster mode is made by the worker, labeled.
			teamA, teamB := "team-a", "team-b"
			values := `
metrics: {enabled: true}
networkPolicy:
  temporal: {namespace: np-temporal}
  nats: {namespace: np-nats}
`
			if tc.namespaced {
				values += "rbac: {mode: namespaced, namespaces: [team-a, team-b]}\n"
			} else {
				teamA, teamB = tc.name+"-a", tc.name+"-b"
				for _, w := range []string{teamA, teamB} {
					_, err := env.cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
						Name: w, Labels: map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelWorkspace: w},
					}}, metav1.CreateOptions{})
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, n := range []string{ns, "np-temporal", "np-nats", "np-storage", "np-monitoring", "kube-system"} {
				if err := createNamespace(ctx, n); err != nil {
					t.Fatal(err)
				}
			}
			objs := render(t, ctx, release, ns, values)
			for _, o := range find(objs, "NetworkPolicy") {
				if err := apply(ctx, o, ns); err != nil {
					t.Fatal(err)
				}
			}
			// Read back what the API server holds, and the namespaces' labels (it adds
			// kubernetes.io/metadata.name itself).
			var pols []networkingv1.NetworkPolicy
			nsLabels := map[string]map[string]string{}
			for _, n := range []string{ns, "np-temporal", "np-nats", "np-storage", "np-monitoring", "kube-system", teamA, teamB} {
				list, err := env.cluster.Client.NetworkingV1().NetworkPolicies(n).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
				if err != nil {
					t.Fatal(err)
				}
				pols = append(pols, list.Items...)
				obj, err := env.cluster.Client.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				nsLabels[n] = obj.Labels
			}
			want := 5 // server, worker, notifier, Temporal's, NATS's
			if tc.namespaced {
				want += 2 // each workspace namespace's egress
			}
			if len(pols) != want || len(find(objs, "NetworkPolicy")) != want {
				t.Fatalf("%d NetworkPolicies on the API server, %d rendered; want %d", len(pols), len(find(objs, "NetworkPolicy")), want)
			}

			component := func(c string) map[string]string {
				return map[string]string{"app.kubernetes.io/name": "opendlc", "app.kubernetes.io/instance": release, "app.kubernetes.io/component": c}
			}
			job := map[string]string{kube.LabelManagedBy: kube.ManagedByValue, kube.LabelJob: "train"}
			var (
				trainA     = endpoint{ns: teamA, labels: job}
				peerA      = endpoint{ns: teamA, labels: job}
				trainB     = endpoint{ns: teamB, labels: job}
				server     = endpoint{ns: ns, labels: component("server")}
				worker     = endpoint{ns: ns, labels: component("worker")}
				notifier   = endpoint{ns: ns, labels: component("notifier")}
				temporal   = endpoint{ns: "np-temporal", labels: map[string]string{"app.kubernetes.io/name": "temporal"}}
				nats       = endpoint{ns: "np-nats", labels: map[string]string{"app.kubernetes.io/name": "nats"}}
				dns        = endpoint{ns: "kube-system", labels: map[string]string{"k8s-app": "kube-dns"}}
				s3         = endpoint{ns: "np-storage", labels: map[string]string{"app": "minio"}}
				prometheus = endpoint{ns: "np-monitoring", labels: map[string]string{"app": "prometheus"}}
				internet   = endpoint{ip: "93.184.216.34"}
				private    = endpoint{ip: "10.0.0.5"}
				metadata   = endpoint{ip: "169.254.169.254"}
			)
			type conn struct {
				what     string
				from, to endpoint
				port     int32
				proto    corev1.Protocol
				allowed  bool
			}
			conns := []conn{
				{"training pod to Temporal's frontend", trainA, temporal, 7233, corev1.ProtocolTCP, false},
				{"training pod to Temporal's history service", trainA, temporal, 7234, corev1.ProtocolTCP, false},
				{"training pod to NATS", trainA, nats, 4222, corev1.ProtocolTCP, false},
				{"training pod to the API server's /metrics", trainA, server, 9090, corev1.ProtocolTCP, false},
				{"training pod to the worker's /metrics", trainA, worker, 9090, corev1.ProtocolTCP, false},
				{"training pod to the API", trainA, server, 8080, corev1.ProtocolTCP, true},
				{"OpenDLC's worker to Temporal", worker, temporal, 7233, corev1.ProtocolTCP, true},
				{"OpenDLC's API server to Temporal", server, temporal, 7233, corev1.ProtocolTCP, true},
				{"OpenDLC's worker to NATS", worker, nats, 4222, corev1.ProtocolTCP, true},
				{"OpenDLC's notifier to NATS", notifier, nats, 4222, corev1.ProtocolTCP, true},
				{"OpenDLC's notifier to a webhook on the internet", notifier, internet, 443, corev1.ProtocolTCP, true},
				{"training pod to the notifier's /metrics", trainA, notifier, 9090, corev1.ProtocolTCP, false},
				{"Prometheus to the notifier's /metrics", prometheus, notifier, 9090, corev1.ProtocolTCP, true},
				{"OpenDLC's worker to Temporal's history service", worker, temporal, 7234, corev1.ProtocolTCP, false},
				{"Temporal's pods among themselves", temporal, temporal, 7234, corev1.ProtocolTCP, true},
				{"NATS's cluster routes", nats, nats, 6222, corev1.ProtocolTCP, true},
				{"Prometheus to the API server's /metrics", prometheus, server, 9090, corev1.ProtocolTCP, true},
				{"Prometheus to the worker's /metrics", prometheus, worker, 9090, corev1.ProtocolTCP, true},
				{"Prometheus to Temporal", prometheus, temporal, 7233, corev1.ProtocolTCP, false},
				{"training pod to its gang's peer", trainA, peerA, 29500, corev1.ProtocolTCP, true},
				{"training pod to DNS", trainA, dns, 53, corev1.ProtocolUDP, true},
				{"training pod to an in-cluster S3", trainA, s3, 9000, corev1.ProtocolTCP, true},
				{"training pod to the internet", trainA, internet, 443, corev1.ProtocolTCP, true},
			}
			if tc.namespaced {
				// The workspace namespaces' egress: only in namespaced mode, where the
				// chart knows them.
				conns = append(conns,
					conn{"training pod to another workspace's pod", trainA, trainB, 29500, corev1.ProtocolTCP, false},
					conn{"training pod to a private address", trainA, private, 7233, corev1.ProtocolTCP, false},
					conn{"training pod to the cloud's metadata", trainA, metadata, 80, corev1.ProtocolTCP, false},
				)
			} else {
				conns = append(conns, conn{"training pod to a private address (cluster mode: no egress policy)", trainA, private, 7233, corev1.ProtocolTCP, true})
			}
			for _, c := range conns {
				// Without the chart's policies every connection is open: what is refused
				// below is refused by them.
				if !allows(t, nil, nsLabels, c.from, c.to, c.port, c.proto) {
					t.Fatalf("%s refused without any policy", c.what)
				}
				if got := allows(t, pols, nsLabels, c.from, c.to, c.port, c.proto); got != c.allowed {
					t.Errorf("%s (%s:%d/%s): allowed %v, want %v", c.what, c.to, c.port, c.proto, got, c.allowed)
				}
			}
		})
	}
}

// endpoint is a pod (namespace and labels) or an address outside the cluster (ip).
type endpoint struct {
	ns     string
	labels map[string]string
	ip     string
}

func (e endpoint) String() string {
	if e.ip != "" {
		return e.ip
	}
	return fmt.Sprintf("%s%v", e.ns, e.labels)
}

// allows evaluates pols, by the NetworkPolicy API's rules, for a connection from src to
// dst on port: src's egress must allow it, and dst's ingress unless dst is an address
// outside the cluster. A pod no policy of a direction selects is open in it. ipBlock
// peers match addresses outside the cluster only (what CNIs do with pod addresses in
// ipBlock varies; the chart's except list covers the private ranges pods use anyway).
func allows(t *testing.T, pols []networkingv1.NetworkPolicy, nsLabels map[string]map[string]string, src, dst endpoint, port int32, proto corev1.Protocol) bool {
	t.Helper()
	return direction(t, pols, nsLabels, networkingv1.PolicyTypeEgress, src, dst, port, proto) &&
		(dst.ip != "" || direction(t, pols, nsLabels, networkingv1.PolicyTypeIngress, dst, src, port, proto))
}

// direction: does the policy of subject (the source for egress, the destination for
// ingress) let peer through on port?
func direction(t *testing.T, pols []networkingv1.NetworkPolicy, nsLabels map[string]map[string]string, typ networkingv1.PolicyType, subject, peer endpoint, port int32, proto corev1.Protocol) bool {
	t.Helper()
	if subject.ip != "" {
		return true
	}
	selected := false
	for _, p := range pols {
		if p.Namespace != subject.ns || !hasType(p, typ) || !selects(t, &p.Spec.PodSelector, subject.labels) {
			continue
		}
		selected = true
		if typ == networkingv1.PolicyTypeEgress {
			for _, r := range p.Spec.Egress {
				if portsMatch(r.Ports, port, proto) && peersMatch(t, r.To, p.Namespace, nsLabels, peer) {
					return true
				}
			}
		} else {
			for _, r := range p.Spec.Ingress {
				if portsMatch(r.Ports, port, proto) && peersMatch(t, r.From, p.Namespace, nsLabels, peer) {
					return true
				}
			}
		}
	}
	return !selected
}

func hasType(p networkingv1.NetworkPolicy, typ networkingv1.PolicyType) bool {
	return slices.Contains(p.Spec.PolicyTypes, typ)
}

func selects(t *testing.T, sel *metav1.LabelSelector, labels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatalf("selector %v: %v", sel, err)
	}
	return s.Matches(labelSet(labels))
}

type labelSet map[string]string

func (l labelSet) Has(k string) bool   { _, ok := l[k]; return ok }
func (l labelSet) Get(k string) string { return l[k] }
func (l labelSet) Lookup(k string) (string, bool) {
	v, ok := l[k]
	return v, ok
}

func portsMatch(ports []networkingv1.NetworkPolicyPort, port int32, proto corev1.Protocol) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		pp := corev1.ProtocolTCP
		if p.Protocol != nil {
			pp = *p.Protocol
		}
		if pp == proto && (p.Port == nil || p.Port.IntVal == port) {
			return true
		}
	}
	return false
}

func peersMatch(t *testing.T, peers []networkingv1.NetworkPolicyPeer, policyNS string, nsLabels map[string]map[string]string, peer endpoint) bool {
	t.Helper()
	if len(peers) == 0 {
		return true
	}
	for _, p := range peers {
		if p.IPBlock != nil {
			if peer.ip != "" && inBlock(t, p.IPBlock, peer.ip) {
				return true
			}
			continue
		}
		if peer.ip != "" {
			continue
		}
		nsOK := peer.ns == policyNS
		if p.NamespaceSelector != nil {
			nsOK = selects(t, p.NamespaceSelector, nsLabels[peer.ns])
		}
		podOK := p.PodSelector == nil || selects(t, p.PodSelector, peer.labels)
		if nsOK && podOK {
			return true
		}
	}
	return false
}

func inBlock(t *testing.T, b *networkingv1.IPBlock, ip string) bool {
	t.Helper()
	addr := netip.MustParseAddr(ip)
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		t.Fatal(err)
	}
	if !cidr.Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Contains(addr) {
			return false
		}
	}
	return true
}
