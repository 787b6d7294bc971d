package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/events"
)

// ReleaseNode releases a quarantined node at once (an administrator's release, `dlc
// node release`): its quarantine taint, label and annotations go, as when a re-check
// finds it healthy. A node that is not quarantined is left alone.
func (b *Backend) ReleaseNode(ctx context.Context, name, message string) (backend.NodeHealth, bool, error) {
	n, err := b.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return backend.NodeHealth{}, false, fmt.Errorf("kube: node %s: %w", name, backend.ErrNodeNotFound)
	}
	if err != nil {
		return backend.NodeHealth{}, false, fmt.Errorf("kube: get node %s: %w", name, err)
	}
	now := b.healthNow().UTC()
	if !quarantined(n) {
		return backend.NodeHealth{Node: name, Healthy: true, Reason: backend.ReasonChecksPassed, CheckedAt: now,
			Message: "not quarantined"}, false, nil
	}
	h := backend.NodeHealth{Node: name, Healthy: true, Reason: backend.ReasonReleased, Message: message, CheckedAt: now,
		Checks: []events.HealthCheck{{Name: backend.ReasonReleased, OK: true, Message: message}}}
	h, err = b.release(ctx, name, h)
	return h, err == nil, err
}
