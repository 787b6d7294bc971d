package kubestack

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations the kwok stages act on (see stages/*.yaml).
const (
	// AnnotationCompleteAfter on a pod holds a Go duration ("1500ms", "30s")
	// or an RFC 3339 time: once the pod is Running, it succeeds after that
	// delay, every container terminated with exit code 0. The delay counts
	// from the pod's last change, normally the moment it became Running.
	// Without it a pod runs until deleted or failed.
	AnnotationCompleteAfter = "kwok.opendlc.io/complete-after"
	// LabelFail ("true") makes a running pod fail: every container
	// terminated with reason Error and the exit code in AnnotationExitCode
	// (default 1), phase Failed. A pod labelled while Pending fails as soon
	// as it is Running.
	LabelFail = "kwok.opendlc.io/fail"
	// AnnotationExitCode is the exit code a pod labelled LabelFail fails with.
	AnnotationExitCode = "kwok.opendlc.io/exit-code"
	// LabelNodeNotReady ("true") makes a node report Ready=False within about
	// two seconds, and keep reporting it while labelled (kwok's chaos stage).
	LabelNodeNotReady = "node-not-ready.stage.kwok.x-k8s.io"
	// LabelImagePullError ("true") on a pod, or ImagePullErrorMarker anywhere in
	// one of its containers' images, makes its image pull fail: the pod stays
	// Pending, its containers waiting with reason ErrImagePull, then a second
	// later ImagePullBackOff, each with the kubelet's kind of message (by
	// default containerd's "not found": the image does not exist). Set it
	// when the pod is created (stages/pod-image-pull-error.yaml). An explicit
	// value wins over the image's marker: setting it to "false" later lets the
	// pull succeed, and the pod runs (a registry that came back).
	LabelImagePullError = "kwok.opendlc.io/image-pull-error"
	// AnnotationImagePullMessage on a pod whose pull fails replaces the
	// ErrImagePull message (and the error ImagePullBackOff repeats), to
	// simulate a pull failing for a reason that may go away, such as a
	// registry timing out.
	AnnotationImagePullMessage = "kwok.opendlc.io/image-pull-message"
	// ImagePullErrorMarker in an image name (registry.local/pull-error:1) has the
	// effect of LabelImagePullError.
	ImagePullErrorMarker = "pull-error"
)

// FailPod makes the pod's containers fail with exitCode, as if the training
// process had crashed: kwok moves the pod to Failed about 100 ms after it is
// (or becomes) Running. It sets LabelFail and AnnotationExitCode.
func (c *Cluster) FailPod(ctx context.Context, namespace, name string, exitCode int32) error {
	patch := map[string]any{"metadata": map[string]any{
		"labels":      map[string]string{LabelFail: "true"},
		"annotations": map[string]string{AnnotationExitCode: strconv.Itoa(int(exitCode))},
	}}
	if err := c.mergePatch(ctx, "pods", namespace, name, patch); err != nil {
		return fmt.Errorf("kubestack: fail pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// SetNodeNotReady makes node report Ready=False, as if its kubelet had lost
// its container runtime; kwok keeps renewing the node's lease. The
// controller manager then taints the node node.kubernetes.io/not-ready
// (NoSchedule and NoExecute) and evicts pods that do not tolerate it. It
// sets LabelNodeNotReady; SetNodeReady undoes it.
func (c *Cluster) SetNodeNotReady(ctx context.Context, node string) error {
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]string{LabelNodeNotReady: "true"}}}
	if err := c.mergePatch(ctx, "nodes", "", node, patch); err != nil {
		return fmt.Errorf("kubestack: set node %s not ready: %w", node, err)
	}
	return nil
}

// SetNodeReady removes LabelNodeNotReady from node, after which kwok
// reports it Ready again and the controller manager lifts its taints.
func (c *Cluster) SetNodeReady(ctx context.Context, node string) error {
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelNodeNotReady: nil}}}
	if err := c.mergePatch(ctx, "nodes", "", node, patch); err != nil {
		return fmt.Errorf("kubestack: set node %s ready: %w", node, err)
	}
	return nil
}

func (c *Cluster) mergePatch(ctx context.Context, resource, namespace, name string, patch any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if resource == "nodes" {
		_, err = c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	} else {
		_, err = c.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	}
	return err
}
