package kubestack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Pod logs. kwok plays the kubelet's log endpoint too: it serves
// /containerLogs/<namespace>/<pod>/<container> on its own HTTPS server, whose
// port the fake nodes advertise as their kubelet endpoint (InternalIP
// 127.0.0.1), so the API server's pods/log subresource (client-go's GetLogs,
// `kubectl logs`) reaches it as it would reach a kubelet. kwok reads each
// container's log from a file named by a Logs object (kwok.x-k8s.io/v1alpha1)
// of the pod's name and namespace; SetPodLogs creates one. The files are in the
// CRI log format, one line per record (CRILogLine); kwok honours follow,
// sinceTime, sinceSeconds, timestamps, tailLines, limitBytes and previous (from
// a second file). kwok cannot tell that a container has exited, so a followed
// stream stays open until the client closes it, where a kubelet ends it once
// the container has exited and its log is drained. A pod without a Logs object
// has no log: the API server answers its log requests with an error.

// kwokGroup is the API group of kwok's resources.
const kwokGroup = "kwok.x-k8s.io"

var (
	logsGVR = schema.GroupVersionResource{Group: kwokGroup, Version: "v1alpha1", Resource: "logs"}
	crdGVR  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

// logsCRD is the CustomResourceDefinition of kwok's Logs kind, with a schema
// that keeps every field: kwok validates the objects it reads itself.
func logsCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "logs." + kwokGroup},
		"spec": map[string]any{
			"group": kwokGroup,
			"scope": "Namespaced",
			"names": map[string]any{"kind": "Logs", "listKind": "LogsList", "plural": "logs", "singular": "logs"},
			"versions": []any{map[string]any{
				"name": "v1alpha1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type":                                 "object",
					"x-kubernetes-preserve-unknown-fields": true,
				}},
			}},
		},
	}}
}

// installLogsCRD creates the Logs CRD (kept if there) and waits until the API
// server serves it, so kwok, started with --enable-crds=Logs, can watch it.
func (c *Cluster) installLogsCRD(ctx context.Context) error {
	dyn, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	_, err = dyn.Resource(crdGVR).Create(ctx, logsCRD(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubestack: create the kwok Logs CRD: %w", err)
	}
	return c.pollUntil(ctx, "kwok Logs CRD served", func(ctx context.Context) error {
		_, err := dyn.Resource(logsGVR).Namespace(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
}

// PodLogs names the files kwok serves one container's log from.
type PodLogs struct {
	// Container is the container's name; "" serves every container of the pod
	// that has no entry of its own.
	Container string
	// File holds the current container's log, in the CRI format (CRILogLine).
	// It may be created or appended to at any time; a follow picks up what is
	// appended, and a file replaced by rename (a rotation) is reopened.
	File string
	// PreviousFile holds the log of the container's previous instance, served
	// for previous=true; "" serves nothing for it.
	PreviousFile string
}

// SetPodLogs makes kwok serve the logs of pod namespace/name from files: it
// creates (or replaces) the pod's Logs object. kwok sees it within about a
// second; poll the log endpoint before relying on it.
func (c *Cluster) SetPodLogs(ctx context.Context, namespace, name string, logs ...PodLogs) error {
	dyn, err := dynamic.NewForConfig(c.Admin)
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	entries := make([]any, 0, len(logs))
	for _, l := range logs {
		e := map[string]any{"logsFile": l.File, "follow": true}
		if l.Container != "" {
			e["containers"] = []any{l.Container}
		}
		if l.PreviousFile != "" {
			e["previousLogsFile"] = l.PreviousFile
		}
		entries = append(entries, e)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kwokGroup + "/v1alpha1",
		"kind":       "Logs",
		"metadata":   map[string]any{"name": name, "namespace": namespace},
		"spec":       map[string]any{"logs": entries},
	}}
	res := dyn.Resource(logsGVR).Namespace(namespace)
	old, err := res.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = res.Create(ctx, obj, metav1.CreateOptions{})
	case err == nil:
		obj.SetResourceVersion(old.GetResourceVersion())
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("kubestack: logs of pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// CRILogLine is one record of a container log file in the CRI format, as a
// container runtime writes it: the time (RFC 3339 with nanoseconds), the
// stream (stdout or stderr), F for a full line, and the text, ending in a
// newline. text must not contain a newline.
func CRILogLine(t time.Time, stream, text string) string {
	return t.UTC().Format(time.RFC3339Nano) + " " + stream + " F " + text + "\n"
}

// AppendLog appends lines to a CRI log file (creating it), each stamped
// with its time: the record form of what a container writes.
func AppendLog(path string, lines ...LogRecord) error {
	var b strings.Builder
	for _, l := range lines {
		stream := l.Stream
		if stream == "" {
			stream = "stdout"
		}
		b.WriteString(CRILogLine(l.Time, stream, l.Text))
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("kubestack: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	return nil
}

// LogRecord is one line of a container's log for AppendLog.
type LogRecord struct {
	Time   time.Time
	Stream string // "stdout" (default) or "stderr"
	Text   string
}
