package kubestack

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"

	"github.com/opendlc/opendlc/internal/tools"
)

// The batch schedulers' pieces a Cluster can add on demand: scheduler-plugins'
// Coscheduling as a second scheduler (with its PodGroup CRD, read from the
// scheduler-plugins module), Kueue's CRDs (from the Kueue module) and a Volcano PodGroup
// CRD (crds/volcano-podgroups.yaml). None starts with the cluster: tests that need them
// ask.

// CoschedulerName is the schedulerName of the second scheduler StartCoscheduler runs,
// the name scheduler-plugins' as-a-second-scheduler installation gives it.
const CoschedulerName = "scheduler-plugins-scheduler"

// Files of the CRDs in their modules.
const (
	schedPluginsModule = "sigs.k8s.io/scheduler-plugins"
	podGroupCRDFile    = "config/crd/bases/scheduling.x-k8s.io_podgroups.yaml"
	kueueModule        = "sigs.k8s.io/kueue"
	kueueCRDDir        = "config/components/crd/bases"
)

// KueueCRDs are the Kueue CRDs InstallKueueCRDs installs: its queues, the flavors a
// ClusterQueue names, and the Workloads it makes of pod groups.
var KueueCRDs = []string{
	"kueue.x-k8s.io_resourceflavors.yaml",
	"kueue.x-k8s.io_clusterqueues.yaml",
	"kueue.x-k8s.io_localqueues.yaml",
	"kueue.x-k8s.io_workloads.yaml",
}

//go:embed crds/volcano-podgroups.yaml
var volcanoPodGroupCRD []byte

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CoschedulerOptions configure StartCoscheduler.
type CoschedulerOptions struct {
	// PermitWaiting is how long a pod of a partly placed group waits at Permit for its
	// siblings before the whole group is released (the plugin's
	// permitWaitingTimeSeconds; a PodGroup's scheduleTimeoutSeconds wins). Default 10s.
	PermitWaiting time.Duration
}

// StartCoscheduler installs scheduler-plugins' PodGroup CRD, lets the scheduler's
// identity read PodGroups, and starts kube-scheduler with the Coscheduling plugin as a
// second scheduler named CoschedulerName: pods whose schedulerName is that are placed
// by it, gang by gang. The first call builds it (minutes; cached by version, see
// internal/tools). Close stops it with the rest.
func (c *Cluster) StartCoscheduler(ctx context.Context, opts CoschedulerOptions) error {
	if opts.PermitWaiting <= 0 {
		opts.PermitWaiting = 10 * time.Second
	}
	bin, err := tools.Ensure(ctx, "coscheduler")
	if err != nil {
		return err
	}
	dir, err := tools.ModuleDir(ctx, schedPluginsModule)
	if err != nil {
		return err
	}
	if err := c.InstallCRDFiles(ctx, filepath.Join(dir, podGroupCRDFile)); err != nil {
		return err
	}
	if err := c.grantPodGroupReads(ctx); err != nil {
		return err
	}
	const name = "coscheduler"
	kubeconfig, err := c.writeCertKubeconfig(name, schedulerUser)
	if err != nil {
		return err
	}
	cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
clientConnection:
  kubeconfig: %q
profiles:
- schedulerName: %s
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: %d
`, kubeconfig, CoschedulerName, int(opts.PermitWaiting.Round(time.Second)/time.Second))
	path := filepath.Join(c.Dir, name+"-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	return c.startController(ctx, name, bin, schedulerUser, "--config", path)
}

// grantPodGroupReads lets the scheduler's user (which the coscheduler runs as) read
// PodGroups, as scheduler-plugins' installation grants its service account.
func (c *Cluster) grantPodGroupReads(ctx context.Context) error {
	const name = "kubestack:coscheduler"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{"scheduling.x-k8s.io"}, Resources: []string{"podgroups"}, Verbs: []string{"get", "list", "watch"},
		}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: schedulerUser}},
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestack: %w", err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestack: %w", err)
	}
	return nil
}

// InstallKueueCRDs installs KueueCRDs from the pinned Kueue module.
func (c *Cluster) InstallKueueCRDs(ctx context.Context) error {
	dir, err := tools.ModuleDir(ctx, kueueModule)
	if err != nil {
		return err
	}
	paths := make([]string, len(KueueCRDs))
	for i, f := range KueueCRDs {
		paths[i] = filepath.Join(dir, kueueCRDDir, f)
	}
	return c.InstallCRDFiles(ctx, paths...)
}

// InstallVolcanoCRDs installs the Volcano PodGroup CRD.
func (c *Cluster) InstallVolcanoCRDs(ctx context.Context) error {
	return c.InstallCRDs(ctx, volcanoPodGroupCRD)
}

// InstallCRDFiles installs the CustomResourceDefinitions of YAML files, as
// InstallCRDs.
func (c *Cluster) InstallCRDFiles(ctx context.Context, paths ...string) error {
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("kubestack: %w", err)
		}
		if err := c.InstallCRDs(ctx, data); err != nil {
			return fmt.Errorf("kubestack: %s: %w", p, err)
		}
	}
	return nil
}

// InstallCRDs creates the CustomResourceDefinitions of a multi-document YAML (ones
// that exist count as created) and waits until the API server serves them
// (Established).
func (c *Cluster) InstallCRDs(ctx context.Context, yamlDocs []byte) error {
	dc, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(yamlDocs)))
	var names []string
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("kubestack: %w", err)
		}
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return fmt.Errorf("kubestack: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() != "CustomResourceDefinition" {
			return fmt.Errorf("kubestack: %s %s is not a CustomResourceDefinition", obj.GetKind(), obj.GetName())
		}
		if _, err := dc.Resource(crdResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubestack: create CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	for _, name := range names {
		err := c.pollUntil(ctx, "CRD "+name+" established", func(ctx context.Context) error {
			crd, err := dc.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			for _, cond := range conds {
				m, _ := cond.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return errors.New("not established yet")
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// AddNode creates one more fake node, as the cluster's own (same capacity, managed by
// kwok), with extra labels and taints, and waits until it is Ready and schedulable.
// It is not added to Nodes; DeleteNode removes it.
func (c *Cluster) AddNode(ctx context.Context, name string, labels map[string]string, taints ...corev1.Taint) error {
	n, err := c.node(name)
	if err != nil {
		return err
	}
	maps.Copy(n.Labels, labels)
	n.Spec.Taints = append(n.Spec.Taints, taints...)
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestack: create node %s: %w", name, err)
	}
	return c.pollUntil(ctx, "node "+name+" Ready and untainted", func(ctx context.Context) error {
		got, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !NodeReady(got) {
			return errors.New("not ready")
		}
		for _, t := range got.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
				return errors.New("still tainted " + t.Key)
			}
		}
		return nil
	})
}

// DeleteNode deletes a node AddNode created.
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kubestack: delete node %s: %w", name, err)
	}
	return nil
}
