package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/schemas"
)

func TestPoolFlags(t *testing.T) {
	f := poolFlags{
		Selector:      []string{"spot=node.example/lifecycle=spot", "spot=gpu=a100"},
		Toleration:    []string{"spot=node.example/spot=true:NoSchedule", "public=shared:NoExecute"},
		PriorityClass: []string{"spot=dlc-preemptible"},
	}
	opts, err := f.options()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts) != 2 {
		t.Errorf("%d pool options, want 2 (public, spot)", len(opts))
	}
	for name, bad := range map[string]poolFlags{
		"unknown pool":      {Selector: []string{"cheap=a=b"}},
		"selector no value": {Selector: []string{"spot=a"}},
		"toleration effect": {Toleration: []string{"spot=a=b"}},
	} {
		if _, err := bad.options(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if diff := cmp.Diff([]string{"spot=dlc-preemptible"}, f.PriorityClass); diff != "" {
		t.Error(diff)
	}
}

func TestPoolPolicyFlags(t *testing.T) {
	f := poolFlags{
		Security:         []string{"spot=restricted", "quota=image"},
		AllowHostNetwork: []string{"quota"},
		AllowHostPath:    []string{"quota=/mnt/nvme", "quota=/data"},
		AllowResource:    []string{"quota=rdma/hca"},
		ServiceAccount:   []string{"public=trainer"},
		ImagePullSecret:  []string{"public=ngc", "public=internal"},
	}
	got, err := f.configs()
	if err != nil {
		t.Fatal(err)
	}
	want := map[schemas.Pool]*kube.PoolConfig{
		schemas.PoolSpot: {Policy: kube.PodPolicy{Security: kube.SecurityRestricted}},
		schemas.PoolQuota: {Policy: kube.PodPolicy{
			AllowHostNetwork: true, HostPaths: []string{"/mnt/nvme", "/data"}, ExtendedResources: []string{"rdma/hca"},
		}},
		schemas.PoolPublic: {Policy: kube.PodPolicy{ServiceAccountName: "trainer", ImagePullSecrets: []string{"ngc", "internal"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	for name, bad := range map[string]poolFlags{
		"unknown profile":   {Security: []string{"spot=baseline"}},
		"host network pool": {AllowHostNetwork: []string{"cheap"}},
		"relative path":     {AllowHostPath: []string{"quota=mnt"}},
		"no resource":       {AllowResource: []string{"quota="}},
	} {
		if _, err := bad.configs(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestPodFlags(t *testing.T) {
	if _, err := (&podFlags{ShmSize: "8Gi"}).options(); err != nil {
		t.Errorf("8Gi: %v", err)
	}
	for name, f := range map[string]podFlags{
		"bad size":      {ShmSize: "lots"},
		"negative size": {ShmSize: "-1Gi"},
		"root user":     {ShmSize: "1Gi", RunAsUser: -1},
	} {
		opts, err := f.options()
		if err == nil {
			// Options check their values when applied.
			_, err = kube.New(fake.NewClientset(), opts...)
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
