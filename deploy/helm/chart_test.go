package helm

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/opendlc/opendlc/auth"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// chartCase is one point of the values matrix: a release of its own (named name, in
// namespace chart-NAME) with values.
type chartCase struct {
	name   string
	values string
	// namespaced is rbac.mode namespaced, with namespaces; otherwise cluster-wide.
	namespaced   bool
	namespaces   []string
	healthChecks bool
	// kinds that must render (beyond the Deployments, Services, ConfigMap and RBAC).
	kinds []string
	// generatedToken: the chart generates the admin token Secret.
	generatedToken bool
	// noMetrics: metrics.enabled false (the worker then has no probes).
	noMetrics bool
	// runs: runs.database, its password Secret and a retention are set.
	runs bool
}

var cases = []chartCase{{
	// The chart's defaults, no values at all.
	name: "defaults", values: "{}",
	healthChecks: true, kinds: []string{"PodDisruptionBudget", "NetworkPolicy"}, generatedToken: true,
}, {
	name: "cluster",
	values: `
temporal: {address: "temporal-frontend.temporal.svc:7233", namespace: opendlc}
nats:
  urls: ["nats://nats-0.nats:4222", "nats://nats-1.nats:4222", "nats://nats-2.nats:4222"]
  credentials: {user: opendlc, password: not-a-real-password}
s3: {endpoint: "http://minio.s3.svc:9000", pathStyle: "true", accessKeyId: opendlc, secretAccessKey: not-a-real-key}
`,
	healthChecks: true, kinds: []string{"Secret", "PodDisruptionBudget", "NetworkPolicy"}, generatedToken: true,
}, {
	// TLS everywhere, Secrets that exist already, Ingress, metrics and ServiceMonitor.
	name: "tls-existing",
	values: `
imagePullSecrets: [registry]
temporal:
  address: "temporal.example.com:7233"
  tls: {enabled: true, existingSecret: temporal-mtls, serverName: temporal.example.com}
nats:
  credentials: {existingSecret: nats-creds, existingSecretType: creds}
  tls: {enabled: true, existingSecret: nats-tls}
s3: {existingSecret: s3-creds, podEndpoint: "http://s3.example.com:9000"}
server:
  adminToken: {existingSecret: admin-token}
  tls: {enabled: true, existingSecret: api-tls}
  nodeSelector: {opendlc.io/control-plane: "true"}
  tolerations: [{key: dedicated, operator: Equal, value: control-plane, effect: NoSchedule}]
worker:
  resources: {requests: {cpu: 500m, memory: 512Mi}}
ingress:
  enabled: true
  className: nginx
  annotations: {nginx.ingress.kubernetes.io/backend-protocol: HTTPS}
  hosts: [{host: opendlc.example.com, paths: [{path: /, pathType: Prefix}]}]
  tls: [{secretName: opendlc-ingress-tls, hosts: [opendlc.example.com]}]
metrics:
  enabled: true
  serviceMonitor: {enabled: true, interval: 15s, labels: {release: prometheus}}
runs:
  database: "postgres://opendlc@postgres.db.svc:5432/opendlc_runs?sslmode=require"
  passwordSecret: {name: runs-db}
  retention: 8760h
`,
	healthChecks: true, kinds: []string{"Ingress", "ServiceMonitor", "PodDisruptionBudget", "NetworkPolicy"}, runs: true,
}, {
	name: "namespaced",
	values: `
rbac: {mode: namespaced, namespaces: [team-a, team-b]}
nats:
  credentials: {creds: "-----BEGIN NATS USER JWT-----\nnot-a-real-jwt\n------END NATS USER JWT------\n"}
worker:
  extraArgs: [--pool-selector, "gpu=nvidia.com/gpu.present=true"]
`,
	namespaced: true, namespaces: []string{"team-a", "team-b"}, healthChecks: true,
	kinds: []string{"Secret", "PodDisruptionBudget", "NetworkPolicy"}, generatedToken: true,
}, {
	// Namespaced without health checks: no node patch, no Role in opendlc-system;
	// Temporal over TLS with the system's roots; an Ingress without TLS.
	name: "namespaced-tls",
	values: `
rbac: {mode: namespaced, namespaces: [team-a]}
worker: {healthChecks: false}
temporal: {address: "temporal.example.com:7233", tls: {enabled: true}}
s3: {podSecret: datasets-s3}
server: {adminToken: {create: false}}
ingress: {enabled: true}
metrics: {enabled: false}
`,
	namespaced: true, namespaces: []string{"team-a"}, noMetrics: true,
	kinds: []string{"Ingress", "PodDisruptionBudget", "NetworkPolicy"},
}, {
	name: "cluster-nohealth",
	values: `
worker: {healthChecks: false, namespacePrefix: dlc-, verbose: true}
server: {verbose: true}
metrics: {enabled: true}
networkPolicy: {enabled: false}
`,
	kinds: []string{"PodDisruptionBudget"}, generatedToken: true,
}}

func (c chartCase) namespace() string { return "chart-" + c.name }

// fullname is the chart's prefix of object names for the case's release.
func (c chartCase) fullname() string { return c.name + "-opendlc" }

// TestLint runs helm lint --strict on the chart with its defaults and with every case's
// values.
func TestLint(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	if _, err := helmCmd(ctx, "lint", "--strict", chartDir); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if _, err := helmCmd(ctx, "lint", "--strict", chartDir, "--namespace", c.namespace(),
			"--values", valuesFile(t, c.values)); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

// TestBadValues: values the chart cannot honour fail the render with an error naming
// the value.
func TestBadValues(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	for _, tc := range []struct{ values, want string }{
		{`rbac: {mode: everywhere}`, `at '/rbac/mode': value must be one of 'cluster', 'namespaced'`},
		{`rbac: {mode: namespaced}`, `rbac.namespaces: namespaced mode needs at least one namespace`},
		{`{rbac: {mode: namespaced, namespaces: [a]}, worker: {namespacePrefix: x-}}`, `worker.namespacePrefix`},
		{`nats: {urls: []}`, `at '/nats/urls': minItems`},
		{`nats: {tls: {enabled: true}}`, `nats.tls.existingSecret`},
		{`nats: {credentials: {user: u}}`, `nats.credentials: user and password go together`},
		{`nats: {credentials: {existingSecret: s, existingSecretType: token}}`, `at '/nats/credentials/existingSecretType'`},
		{`server: {tls: {enabled: true}}`, `server.tls.existingSecret`},
		{`s3: {accessKeyId: k}`, `s3.accessKeyId and s3.secretAccessKey go together`},
		{`temporal: {tls: {existingSecret: s}}`, `temporal.tls.existingSecret`},
		// values.schema.json: each error names the value's path.
		{`s3: {endpoint: "minio.s3.svc:9000"}`, `at '/s3/endpoint'`},
		{`s3: {endpiont: "http://minio.s3.svc:9000"}`, `additional properties 'endpiont' not allowed`},
		{`s3: {pathStyle: "yes"}`, `at '/s3/pathStyle'`},
		{`temporal: {address: temporal-frontend}`, `at '/temporal/address'`},
		{`nats: {urls: ["http://nats:4222"]}`, `at '/nats/urls/0'`},
		{`image: {pullPolicy: Sometimes}`, `at '/image/pullPolicy'`},
		{`server: {replicas: 0}`, `at '/server/replicas'`},
		{`worker: {readinessProbe: {periodSeconds: 0}}`, `at '/worker/readinessProbe/periodSeconds'`},
		{`metrics: {port: 70000}`, `at '/metrics/port'`},
		{`rbac: {mode: namespaced, namespaces: [Team_A]}`, `at '/rbac/namespaces/0'`},
		// A PodDisruptionBudget that no drain could ever get past.
		{`worker: {replicas: 1}`, `worker.podDisruptionBudget.minAvailable: 1 is not below worker.replicas (1)`},
		{`server: {replicas: 2, podDisruptionBudget: {minAvailable: 2}}`, `server.podDisruptionBudget.minAvailable: 2 is not below server.replicas (2)`},
	} {
		out, err := helmCmd(ctx, "template", "bad", chartDir, "--values", valuesFile(t, tc.values))
		if err == nil {
			t.Errorf("values %s: rendered %d bytes, want an error", tc.values, len(out))
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("values %s: error %v\nwant it to contain %q", tc.values, err, tc.want)
		}
	}
}

// TestChartMatrix renders every case, checks the objects, parses the containers' args
// with the real dlc, applies everything to the control plane with strict validation,
// waits for the Deployments' pods to be created, and checks the worker's rights.
func TestChartMatrix(t *testing.T) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := itest.Context(t, 4*time.Minute)
			objs := render(t, ctx, c.name, c.namespace(), c.values)
			checkObjects(t, c, objs)
			checkRBAC(t, c, objs)
			for _, d := range find(objs, "Deployment") {
				dep := typed[appsv1.Deployment](t, d)
				for _, ctr := range dep.Spec.Template.Spec.Containers {
					checkArgs(t, ctx, ctr)
				}
			}
			if err := createNamespace(ctx, c.namespace()); err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				if err := apply(ctx, o, c.namespace()); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("applied %d objects: %s", len(objs), kindCounts(objs))
			waitPods(t, ctx, c)
			checkAccess(t, ctx, c)
		})
	}
}

func kindCounts(objs []*unstructured.Unstructured) string {
	var kinds []string
	n := map[string]int{}
	for _, o := range objs {
		if n[o.GetKind()] == 0 {
			kinds = append(kinds, o.GetKind())
		}
		n[o.GetKind()]++
	}
	var parts []string
	for _, k := range kinds {
		parts = append(parts, k+"="+strconv.Itoa(n[k]))
	}
	return strings.Join(parts, " ")
}

// checkObjects checks what the chart promises whatever the values: two API servers
// probed on /healthz behind a Service and a PodDisruptionBudget, a worker as the
// service account the RBAC binds, and the kinds the case switches on.
func checkObjects(t *testing.T, c chartCase, objs []*unstructured.Unstructured) {
	t.Helper()
	byKey := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byKey[key(o)] = o
	}
	full := c.fullname()
	server, ok := byKey["Deployment//"+full+"-server"]
	if !ok {
		t.Fatalf("no Deployment %s-server among %s", full, kindCounts(objs))
	}
	sd := typed[appsv1.Deployment](t, server)
	if r := sd.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("server replicas %v, want 2", r)
	}
	ctr := sd.Spec.Template.Spec.Containers[0]
	// Liveness asks the API; readiness asks /readyz of the metrics port (Temporal and
	// NATS reachable), or the API's /healthz without metrics.
	checkProbe(t, "server liveness", ctr.LivenessProbe, "/healthz", "http")
	if c.noMetrics {
		checkProbe(t, "server readiness", ctr.ReadinessProbe, "/healthz", "http")
	} else {
		checkProbe(t, "server readiness", ctr.ReadinessProbe, "/readyz", "metrics")
		checkPort(t, "server", ctr, "metrics")
	}
	if r := ctr.Resources.Requests; r.Cpu().IsZero() || r.Memory().IsZero() {
		t.Errorf("server resource requests %v, want cpu and memory", r)
	}
	if _, ok := byKey["Service//"+full+"-server"]; !ok {
		t.Errorf("no Service %s-server", full)
	}
	if pdb, ok := byKey["PodDisruptionBudget//"+full+"-server"]; ok {
		p := typed[policyv1.PodDisruptionBudget](t, pdb)
		if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 1 ||
			!cmp.Equal(p.Spec.Selector.MatchLabels, sd.Spec.Selector.MatchLabels) {
			t.Errorf("PodDisruptionBudget %+v, want minAvailable 1 over the server's pods", p.Spec)
		}
	}
	worker, ok := byKey["Deployment//"+full+"-worker"]
	if !ok {
		t.Fatalf("no Deployment %s-worker", full)
	}
	wd := typed[appsv1.Deployment](t, worker)
	if sa := wd.Spec.Template.Spec.ServiceAccountName; sa != full+"-worker" {
		t.Errorf("worker service account %q, want %s-worker", sa, full)
	}
	if _, ok := byKey["ServiceAccount//"+full+"-worker"]; !ok {
		t.Errorf("no ServiceAccount %s-worker", full)
	}
	wctr := wd.Spec.Template.Spec.Containers[0]
	checkRunsEnv(t, c, ctr, wctr)
	if c.noMetrics {
		if wctr.ReadinessProbe != nil || wctr.LivenessProbe != nil {
			t.Errorf("worker probes %+v %+v with metrics off, want none (its health is on the metrics port)", wctr.ReadinessProbe, wctr.LivenessProbe)
		}
	} else {
		checkProbe(t, "worker readiness", wctr.ReadinessProbe, "/readyz", "metrics")
		checkProbe(t, "worker liveness", wctr.LivenessProbe, "/healthz", "metrics")
		checkPort(t, "worker", wctr, "metrics")
		if !slices.Contains(wctr.Args, "--metrics-addr=:9090") {
			t.Errorf("worker args %q lack --metrics-addr=:9090", wctr.Args)
		}
	}
	if r := wctr.Resources.Requests; r.Cpu().IsZero() || r.Memory().IsZero() {
		t.Errorf("worker resource requests %v, want cpu and memory", r)
	}
	if pdb, ok := byKey["PodDisruptionBudget//"+full+"-worker"]; !ok {
		t.Errorf("no PodDisruptionBudget %s-worker", full)
	} else {
		p := typed[policyv1.PodDisruptionBudget](t, pdb)
		if p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 1 ||
			!cmp.Equal(p.Spec.Selector.MatchLabels, wd.Spec.Selector.MatchLabels) {
			t.Errorf("worker PodDisruptionBudget %+v, want minAvailable 1 over the worker's pods", p.Spec)
		}
	}
	args := wctr.Args
	for _, ns := range c.namespaces {
		if !slices.Contains(args, "--kube-namespace="+ns) {
			t.Errorf("worker args %q lack --kube-namespace=%s", args, ns)
		}
	}
	if want := "--health-checks=" + boolString(c.healthChecks); !slices.Contains(args, want) {
		t.Errorf("worker args %q lack %s", args, want)
	}
	for _, kind := range c.kinds {
		if len(find(objs, kind)) == 0 {
			t.Errorf("no %s rendered", kind)
		}
	}
	if !slices.Contains(c.kinds, "Ingress") && len(find(objs, "Ingress")) > 0 {
		t.Error("an Ingress rendered with ingress.enabled false")
	}
	if !slices.Contains(c.kinds, "NetworkPolicy") && len(find(objs, "NetworkPolicy")) > 0 {
		t.Error("a NetworkPolicy rendered with networkPolicy.enabled false")
	}
	tokenSecret, ok := byKey["Secret//"+full+"-admin-token"]
	if ok != c.generatedToken {
		t.Errorf("admin token Secret rendered: %v, want %v", ok, c.generatedToken)
	}
	if ok {
		data, _, _ := unstructured.NestedString(tokenSecret.Object, "data", "admin-token")
		token, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := auth.ParseToken(string(token)); err != nil {
			t.Errorf("generated admin token %q: %v", token, err)
		}
	}
}

// checkProbe checks that p is an HTTP GET of path on the container port named port.
func checkProbe(t *testing.T, what string, p *corev1.Probe, path, port string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.String() != port {
		t.Errorf("%s probe %+v, want GET %s on port %s", what, p, path, port)
	}
}

// checkPort checks that the container declares the port named name.
func checkPort(t *testing.T, what string, ctr corev1.Container, name string) {
	t.Helper()
	for _, p := range ctr.Ports {
		if p.Name == name {
			return
		}
	}
	t.Errorf("%s: no container port %s among %+v", what, name, ctr.Ports)
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

// checkArgs parses a container's args with the real dlc: `dlc ARGS... --help` exits 0
// only when every flag is one of the command's and every value parses (cobra parses the
// flags before it looks at --help).
func checkArgs(t *testing.T, ctx context.Context, ctr corev1.Container) {
	t.Helper()
	if !cmp.Equal(ctr.Command, []string{"dlc"}) {
		t.Errorf("%s: command %q, want [dlc]", ctr.Name, ctr.Command)
	}
	args := ctr.Args
	if len(args) == 0 || args[0] != ctr.Name {
		t.Fatalf("%s: args %q, want them to start with the subcommand %s", ctr.Name, args, ctr.Name)
	}
	if out, err := dlcHelp(ctx, args...); err != nil {
		t.Errorf("dlc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// The check has teeth: a flag dlc does not know fails it.
	if out, err := dlcHelp(ctx, append(slices.Clone(args), "--no-such-flag")...); err == nil ||
		!strings.Contains(string(out), "unknown flag: --no-such-flag") {
		t.Errorf("dlc %s --no-such-flag: err %v, output %s; want unknown flag", args[0], err, out)
	}
}

func dlcHelp(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, env.dlc, append(args, "--help")...)
	cmd.Env = os.Environ()
	return cmd.CombinedOutput()
}

// checkRBAC checks the case's Roles and ClusterRoles hold exactly the backend's rules
// for its mode, bound to the worker's service account.
func checkRBAC(t *testing.T, c chartCase, objs []*unstructured.Unstructured) {
	t.Helper()
	name := c.fullname() + "-worker"
	want := map[string][]rbacv1.PolicyRule{}
	if c.namespaced {
		for _, ns := range c.namespaces {
			want["Role/"+ns+"/"+name] = kube.NamespaceRules()
		}
		if c.healthChecks {
			want["Role/"+kube.WorkerNamespace+"/"+name] = kube.NamespaceRules()
		}
		want["ClusterRole//"+name+"-nodes"] = kube.NodeReadRules()
	} else {
		want["ClusterRole//"+name] = append(append(kube.NamespaceRules(), kube.NamespaceCreateRules()...), kube.NodeReadRules()...)
	}
	if c.healthChecks {
		want["ClusterRole//"+name+"-node-health"] = kube.NodeHealthRules()
	}
	got := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			got[key(o)] = typed[rbacv1.Role](t, o).Rules
		case "ClusterRole":
			got[key(o)] = typed[rbacv1.ClusterRole](t, o).Rules
		case "RoleBinding", "ClusterRoleBinding":
			b := typed[rbacv1.RoleBinding](t, o)
			role := strings.TrimSuffix(o.GetKind(), "Binding")
			if _, ok := want[role+"/"+o.GetNamespace()+"/"+b.RoleRef.Name]; !ok || b.RoleRef.Kind != role || b.Name != b.RoleRef.Name {
				t.Errorf("%s binds %s %s, which the case does not want", key(o), b.RoleRef.Kind, b.RoleRef.Name)
			}
			wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: c.namespace()}}
			if diff := cmp.Diff(wantSubjects, b.Subjects); diff != "" {
				t.Errorf("%s subjects (-want +got):\n%s", key(o), diff)
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("roles and their rules (-want +got):\n%s", diff)
	}
	for k := range want {
		if len(find(objs, strings.SplitN(k, "/", 2)[0]+"Binding")) == 0 {
			t.Errorf("%s has no binding", k)
		}
	}
}

// waitPods waits until the Deployments' ReplicaSets have created every pod: the API
// server admitted the pod template as the controllers submit it.
func waitPods(t *testing.T, ctx context.Context, c chartCase) {
	t.Helper()
	for _, d := range []string{c.fullname() + "-server", c.fullname() + "-worker"} {
		err := testutil.Poll(ctx, 2*time.Minute, "deployment "+d+"'s pods", func() error {
			dep, err := env.cluster.Client.AppsV1().Deployments(c.namespace()).Get(ctx, d, metav1.GetOptions{})
			if err != nil {
				return err
			}
			pods, err := env.cluster.Client.CoreV1().Pods(c.namespace()).List(ctx, metav1.ListOptions{
				LabelSelector: metav1.FormatLabelSelector(dep.Spec.Selector),
			})
			if err != nil {
				return err
			}
			if len(pods.Items) != int(*dep.Spec.Replicas) {
				return fmt.Errorf("deployment %s: %d pods, want %d (status %+v)", d, len(pods.Items), *dep.Spec.Replicas, dep.Status)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// access is one SubjectAccessReview: may the worker do verb on resource in namespace?
type access struct {
	verb, resource, namespace string
	allowed                   bool
}

// checkAccess asks the API server's authorizer what the worker's service account may
// do with the RBAC the chart applied.
func checkAccess(t *testing.T, ctx context.Context, c chartCase) {
	t.Helper()
	var checks []access
	if c.namespaced {
		for _, ns := range c.namespaces {
			checks = append(checks, access{"create", "pods", ns, true}, access{"watch", "services", ns, true})
		}
		checks = append(checks,
			access{"create", "pods", "kube-system", false},
			access{"list", "pods", "", false},
			access{"create", "namespaces", "", false},
			access{"create", "pods", kube.WorkerNamespace, c.healthChecks})
	} else {
		checks = append(checks,
			access{"create", "pods", "any-workspace", true},
			access{"list", "pods", "", true},
			access{"create", "namespaces", "", true})
	}
	checks = append(checks,
		access{"watch", "nodes", "", true},
		access{"patch", "nodes", "", c.healthChecks},
		access{"get", "secrets", "team-a", false},
		access{"patch", "pods", "team-a", false},
		access{"delete", "nodes", "", false})
	user := "system:serviceaccount:" + c.namespace() + ":" + c.fullname() + "-worker"
	// Allowed checks first, polled: the authorizer sees new bindings through its
	// informers. Once they pass, the denials are settled too.
	slices.SortStableFunc(checks, func(a, b access) int {
		if a.allowed == b.allowed {
			return 0
		}
		if a.allowed {
			return -1
		}
		return 1
	})
	for _, a := range checks {
		check := func() error {
			sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: user,
				ResourceAttributes: &authzv1.ResourceAttributes{
					Verb: a.verb, Resource: a.resource, Namespace: a.namespace,
				},
			}}
			res, err := env.cluster.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if res.Status.Allowed != a.allowed {
				return fmt.Errorf("%s %s in %q: allowed %v, want %v (%s)", a.verb, a.resource, a.namespace,
					res.Status.Allowed, a.allowed, res.Status.Reason)
			}
			return nil
		}
		d := 30 * time.Second
		if !a.allowed {
			d = 0
		}
		if err := testutil.Poll(ctx, d, "the access review", check); err != nil {
			t.Error(err)
		}
	}
}

// TestRBACEqualsManifests: installed as release opendlc in opendlc-system, the chart's
// RBAC is deploy/rbac.yaml (cluster-wide) and deploy/rbac-namespaced.yaml (namespaced,
// namespace team-a) object for object, rule for rule, less the Namespace (helm install
// --create-namespace makes it); with health checks off, less the objects those files
// say to drop; with worker.nodeStats, with deploy/rbac-node-stats.yaml's too.
func TestRBACEqualsManifests(t *testing.T) {
	ctx := itest.Context(t, 3*time.Minute)
	nodeHealth := []string{
		"ClusterRole//" + kube.WorkerNodeHealthClusterRole, "ClusterRoleBinding//" + kube.WorkerNodeHealthClusterRole,
	}
	for _, tc := range []struct {
		file, values string
		drop         []string
	}{
		{"../rbac.yaml", `{}`, nil},
		{"../rbac.yaml", `worker: {healthChecks: false}`, nodeHealth},
		{"../rbac.yaml ../rbac-node-stats.yaml", `worker: {nodeStats: true}`, nil},
		{"../rbac-namespaced.yaml", `rbac: {mode: namespaced, namespaces: [team-a]}`, nil},
		{"../rbac-namespaced.yaml", `{rbac: {mode: namespaced, namespaces: [team-a]}, worker: {healthChecks: false}}`,
			append(slices.Clone(nodeHealth),
				"Role/"+kube.WorkerNamespace+"/"+kube.WorkerRole, "RoleBinding/"+kube.WorkerNamespace+"/"+kube.WorkerRole)},
	} {
		var fileObjs []*unstructured.Unstructured
		for f := range strings.FieldsSeq(tc.file) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := decodeAll(data)
			if err != nil {
				t.Fatal(err)
			}
			fileObjs = append(fileObjs, objs...)
		}
		want := rbacObjects(t, fileObjs, tc.drop)
		got := rbacObjects(t, render(t, ctx, "opendlc", kube.WorkerNamespace, tc.values), nil)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s with values %s: RBAC objects (-file +chart):\n%s", tc.file, tc.values, diff)
		}
	}
}

// rbacObject is what an RBAC manifest grants: rules of a role, or a binding's role and
// subjects.
type rbacObject struct {
	Rules    []rbacv1.PolicyRule
	RoleRef  rbacv1.RoleRef
	Subjects []rbacv1.Subject
}

// rbacObjects maps Kind/namespace/name to the grant of every ServiceAccount, Role,
// ClusterRole and binding among objs, but those in drop. A service account without a
// namespace is put in the worker's.
func rbacObjects(t *testing.T, objs []*unstructured.Unstructured, drop []string) map[string]rbacObject {
	t.Helper()
	out := map[string]rbacObject{}
	for _, o := range objs {
		var v rbacObject
		switch o.GetKind() {
		case "ServiceAccount":
			if o.GetNamespace() == "" {
				o.SetNamespace(kube.WorkerNamespace)
			}
		case "Role":
			v.Rules = typed[rbacv1.Role](t, o).Rules
		case "ClusterRole":
			v.Rules = typed[rbacv1.ClusterRole](t, o).Rules
		case "RoleBinding", "ClusterRoleBinding":
			b := typed[rbacv1.RoleBinding](t, o)
			v.RoleRef, v.Subjects = b.RoleRef, b.Subjects
		default:
			continue
		}
		if !slices.Contains(drop, key(o)) {
			out[key(o)] = v
		}
	}
	return out
}

// checkRunsEnv checks the run record database's settings: with runs.database both
// processes read its DSN from the ConfigMap and the password from the Secret, and the
// server has the retention; without, neither has any.
func checkRunsEnv(t *testing.T, c chartCase, server, worker corev1.Container) {
	t.Helper()
	for _, ctr := range []corev1.Container{server, worker} {
		var dsn, password bool
		for _, e := range ctr.Env {
			switch {
			case e.Name == "DLC_RUNS_DATABASE" && e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil &&
				e.ValueFrom.ConfigMapKeyRef.Name == c.fullname()+"-config":
				dsn = true
			case e.Name == "PGPASSWORD" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
				e.ValueFrom.SecretKeyRef.Name == "runs-db" && e.ValueFrom.SecretKeyRef.Key == "password":
				password = true
			}
		}
		if dsn != c.runs || password != c.runs {
			t.Errorf("%s: DLC_RUNS_DATABASE from the ConfigMap %v, PGPASSWORD from runs-db %v; want both %v", ctr.Name, dsn, password, c.runs)
		}
	}
	if got := slices.Contains(server.Args, "--runs-retention=8760h"); got != c.runs {
		t.Errorf("server args %q: --runs-retention=8760h %v, want %v", server.Args, got, c.runs)
	}
}
