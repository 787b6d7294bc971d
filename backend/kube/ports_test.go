package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/frameworks"
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
