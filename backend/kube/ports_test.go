package kube

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/opendlc/opendlc/frameworks"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// Ray's GCS port is Ray's default, 6379, unless the rendezvous port already is.
func TestPortsUseConventionalNumbers(t *testing.T) {
	cs := newClient()
	tests := map[string]struct {
		rendezvous int
		want       []namedPort
	}{
		"ray's default": {
			rendezvous: DefaultRendezvousPort,
			want: []namedPort{
				{key: frameworks.PortRendezvous, name: "rendezvous", port: DefaultRendezvousPort},
				{key: frameworks.PortRayGCS, name: "ray-gcs", port: 6379},
			},
		},
		"taken by the rendezvous port": {
			rendezvous: 6379,
			want: []namedPort{
				{key: frameworks.PortRendezvous, name: "rendezvous", port: 6379},
				{key: frameworks.PortRayGCS, name: "ray-gcs", port: 6380},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := newUncachedBackend(t, cs, WithRendezvousPort(tc.rendezvous))
			got := b.ports(frameworks.Ray{}.PortNames())
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(namedPort{})); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}

// A PaddlePaddle gang's pods carry PaddleJob's environment: the rendezvous replica
// (worker 0 here, the collective mode) gets POD_IP_DUMMY from its pod's status.podIP,
// first in its environment, and PADDLE_MASTER "$(POD_IP_DUMMY):36543" that the kubelet
// expands to its own IP, the others worker 0's DNS name; the container port is
// PaddleJob's, "master" on 36543.
func TestLaunchPaddlePodIP(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	launch(t, b, gangOf(t, schemastest.Job("ernie").Workspace("vision").Framework(schemas.FrameworkPaddle).
		Role("worker", 2).Env("PADDLE_MASTER", "overridden")))
	ps := pods(t, cs, "vision")
	podIP := corev1.EnvVar{Name: "POD_IP_DUMMY", ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"},
	}}
	for name, want := range map[string]string{
		"ernie-worker-0-a1": "$(POD_IP_DUMMY):36543",
		"ernie-worker-1-a1": "worker-0.ernie-a1.vision.svc:36543",
	} {
		c := ps[name].Spec.Containers[0]
		env := map[string]string{}
		for _, e := range c.Env {
			env[e.Name] = e.Value
		}
		if env["PADDLE_MASTER"] != want || env["PADDLE_JOB_ID"] != "ernie" || env["PADDLE_NNODES"] != "2" {
			t.Errorf("%s: PADDLE_MASTER %q, PADDLE_JOB_ID %q, PADDLE_NNODES %q; want %q, ernie, 2",
				name, env["PADDLE_MASTER"], env["PADDLE_JOB_ID"], env["PADDLE_NNODES"], want)
		}
		_, hasIP := env["POD_IP_DUMMY"]
		if leader := name == "ernie-worker-0-a1"; leader != hasIP {
			t.Errorf("%s: POD_IP_DUMMY set %v, want %v", name, hasIP, leader)
		} else if leader && !cmp.Equal(podIP, c.Env[0]) {
			t.Errorf("%s: first variable %+v, want %+v", name, c.Env[0], podIP)
		}
		if !slices.Contains(c.Ports, corev1.ContainerPort{Name: "master", ContainerPort: 36543, Protocol: corev1.ProtocolTCP}) {
			t.Errorf("%s: ports %v, want master/36543", name, c.Ports)
		}
	}
}
