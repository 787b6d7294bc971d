// Package helm tests the OpenDLC Helm chart (deploy/helm/opendlc) with helm built from
// its Go module (internal/tools): `helm lint`, and `helm template` over a matrix of
// values whose every rendered object is applied, for real, to the Kubernetes test
// control plane (kubestack) with the API server's strict field validation. It checks
// that the chart's RBAC is the rules of deploy/rbac.yaml and deploy/rbac-namespaced.yaml
// (and grants what they grant, by SubjectAccessReview), and that the containers' args
// parse with the flag set of the real `dlc server` and `dlc worker`.
package helm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/internal/tools"
	"github.com/opendlc/opendlc/kubestack"
)

// chartDir is the chart under test, relative to this package.
const chartDir = "opendlc"

// workspaceNamespaces are the namespaces the namespaced cases run workspaces in; the
// test creates them, as an administrator would.
var workspaceNamespaces = []string{"team-a", "team-b"}

var env struct {
	helm    string
	dlc     string
	cluster *kubestack.Cluster
	dyn     dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
}

func TestMain(m *testing.M) {
	os.Exit(itest.Main(m, "helm", 20*time.Minute, func(ctx context.Context, dir string) (func(), error) {
		return teardown, setup(ctx, dir)
	}))
}

func teardown() {
	if env.cluster != nil {
		env.cluster.Close()
	}
}

func setup(ctx context.Context, dir string) error {
	var err error
	if env.helm, err = tools.Ensure(ctx, "helm"); err != nil {
		return err
	}
	env.dlc = filepath.Join(dir, "dlc")
	if err := itest.Build(ctx, "./cmd/dlc", env.dlc); err != nil {
		return err
	}
	if env.cluster, err = kubestack.Start(ctx, kubestack.Options{Dir: filepath.Join(dir, "cluster")}); err != nil {
		return err
	}
	if env.dyn, err = dynamic.NewForConfig(env.cluster.Admin); err != nil {
		return err
	}
	env.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(env.cluster.Client.Discovery()))
	for _, ns := range append(slices.Clone(workspaceNamespaces), kube.WorkerNamespace) {
		if err := createNamespace(ctx, ns); err != nil {
			return err
		}
	}
	return installServiceMonitorCRD(ctx)
}

func createNamespace(ctx context.Context, name string) error {
	_, err := env.cluster.Client.CoreV1().Namespaces().Create(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// installServiceMonitorCRD applies testdata/servicemonitor-crd.yaml and waits until the
// API server serves the kind.
func installServiceMonitorCRD(ctx context.Context) error {
	data, err := os.ReadFile("testdata/servicemonitor-crd.yaml")
	if err != nil {
		return err
	}
	objs, err := decodeAll(data)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := apply(ctx, o, ""); err != nil {
			return err
		}
	}
	gvk := schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"}
	return testutil.Poll(ctx, time.Minute, "the ServiceMonitor kind is served", func() error {
		env.mapper.Reset()
		_, err := env.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		return err
	})
}

// decodeAll decodes every non-empty document of a multi-document YAML stream.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue // only comments
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// apply writes obj by server-side apply with strict field validation: an unknown or
// duplicate field is an error, not a warning. A namespaced object without a namespace
// goes into ns, as helm install -n ns would put it.
func apply(ctx context.Context, obj *unstructured.Unstructured, ns string) error {
	gvk := obj.GroupVersionKind()
	mapping, err := env.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	var ri dynamic.ResourceInterface = env.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(ns)
		}
		ri = env.dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{
		FieldManager: "opendlc-chart-test", Force: new(true), FieldValidation: metav1.FieldValidationStrict,
	})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// helmCmd runs helm with args and returns its standard output; on failure the error
// holds standard error.
func helmCmd(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, env.helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Keep helm's own state (repositories, cache) out of the user's home.
	tmp := os.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+tmp+"/opendlc-helm-cache",
		"HELM_CONFIG_HOME="+tmp+"/opendlc-helm-config", "HELM_DATA_HOME="+tmp+"/opendlc-helm-data")
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.Bytes(), nil
}

// valuesFile writes values into a file of the test's temporary directory.
func valuesFile(t *testing.T, values string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// render runs helm template for a release in namespace ns with values.
func render(t *testing.T, ctx context.Context, release, ns, values string) []*unstructured.Unstructured {
	t.Helper()
	out, err := helmCmd(ctx, "template", release, chartDir, "--namespace", ns, "--values", valuesFile(t, values))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeAll(out)
	if err != nil {
		t.Fatalf("decode helm template's output: %v", err)
	}
	return objs
}

// typed converts obj into T.
func typed[T any](t *testing.T, obj *unstructured.Unstructured) *T {
	t.Helper()
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &v); err != nil {
		t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return &v
}

// find returns the rendered objects of kind.
func find(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// key names an object as Kind/namespace/name.
func key(o *unstructured.Unstructured) string {
	return o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}
