package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/opendlc/opendlc/client"
)

// gangShape is the shape of OpenDLC's objects for a gang: a pod's spec and the
// Service's.
type gangShape struct {
	pod corev1.PodSpec
	svc corev1.ServiceSpec
}

// captureShape launches a 1-replica job through OpenDLC in its own workspace and
// returns the shape of its pod and Service, so that the client-go baseline creates
// objects of the same shape (environment, ports, volumes, security context, owner) as
// OpenDLC's: the API server, the scheduler, the controllers and kwok then handle the
// same objects on both sides.
func captureShape(ctx context.Context, cs kubernetes.Interface, c *client.Client) (gangShape, error) {
	const ws, sel = "bench-template", "opendlc.io/job=job"
	spec := fmt.Sprintf(`{"apiVersion":"opendlc.io/v1alpha1","kind":"TrainingJob","metadata":{"name":"job","workspace":%q},
"spec":{"framework":"pytorch","image":"registry.local/train:1.4","command":["train"],"roles":{"worker":{"replicas":1}}}}`, ws)
	if _, err := c.SubmitJob(ctx, []byte(spec)); err != nil {
		return gangShape{}, err
	}
	if err := waitRunning(ctx, cs, ws, sel, 1); err != nil {
		return gangShape{}, err
	}
	pods, err := cs.CoreV1().Pods(ws).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return gangShape{}, err
	}
	svcs, err := cs.CoreV1().Services(ws).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return gangShape{}, err
	}
	if len(pods.Items) != 1 || len(svcs.Items) != 1 {
		return gangShape{}, fmt.Errorf("the template job has %d pods and %d services, want 1 and 1", len(pods.Items), len(svcs.Items))
	}
	shape := gangShape{pod: pods.Items[0].Spec, svc: svcs.Items[0].Spec}
	if _, err := c.StopJob(ctx, ws, "job", "bench template captured"); err != nil {
		return gangShape{}, err
	}
	return shape, waitNoPods(ctx, cs, ws, sel)
}

// plainService is the baseline's headless Service, of the shape of OpenDLC's.
func plainService(shape gangShape) *corev1.Service {
	spec := *shape.svc.DeepCopy()
	spec.ClusterIPs = nil
	spec.Selector = map[string]string{"bench": "plain"}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: spec}
}

// plainPod is the baseline's pod i: OpenDLC's pod spec with the baseline's own
// hostname, owned by the baseline's Service as OpenDLC's pods are by theirs.
func plainPod(shape gangShape, svc *corev1.Service, i int) *corev1.Pod {
	name := fmt.Sprintf("plain-%d", i)
	spec := *shape.pod.DeepCopy()
	spec.NodeName = ""
	spec.Hostname, spec.Subdomain = name, svc.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"bench": "plain"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: new(true), BlockOwnerDeletion: new(true),
			}},
		},
		Spec: spec,
	}
}
