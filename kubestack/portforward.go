package kubestack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"

	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward forwards a port on 127.0.0.1 to port of pod ns/name the way `kubectl
// port-forward` does: through the API server's pods/portforward subresource, upgraded
// to SPDY and proxied to the pod's kubelet, which has containerd dial the port inside
// the pod's network namespace. Only real nodes run pods that can be reached. It returns
// the local address (a free port) once the forward listens; stop closes it. The
// forward ends by itself when the pod goes away (as kubectl's does).
func (c *Cluster) PortForward(ctx context.Context, ns, pod string, port int) (addr string, stop func(), err error) {
	transport, upgrader, err := spdy.RoundTripperFor(c.Admin)
	if err != nil {
		return "", nil, fmt.Errorf("kubestack: port-forward: %w", err)
	}
	url := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url)
	stopCh, readyCh := make(chan struct{}), make(chan struct{})
	errOut := &lockedBuffer{}
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)},
		stopCh, readyCh, io.Discard, errOut)
	if err != nil {
		return "", nil, fmt.Errorf("kubestack: port-forward to %s/%s:%d: %w", ns, pod, port, err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	var once sync.Once
	stop = func() { once.Do(func() { close(stopCh) }) }
	select {
	case <-readyCh:
	case err := <-done:
		return "", nil, fmt.Errorf("kubestack: port-forward to %s/%s:%d: %w (%s)", ns, pod, port, errors.Join(err, errors.New("ended before it listened")), errOut)
	case <-ctx.Done():
		stop()
		return "", nil, ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err == nil && len(ports) != 1 {
		err = fmt.Errorf("%d local ports, want 1", len(ports))
	}
	if err != nil {
		stop()
		return "", nil, fmt.Errorf("kubestack: port-forward to %s/%s:%d: local port: %w", ns, pod, port, err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))), stop, nil
}

// lockedBuffer is the forward's error output, written by its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
