package app

import (
	"testing"

	"k8s.io/client-go/rest"

	"github.com/opendlc/opendlc/backend/kube"
)

// The worker's client-side rate limit: a limit given replaces the configuration's, a
// zero field keeps kube.RESTConfig's default.
func TestKubeClientLimitsApply(t *testing.T) {
	for _, tc := range []struct {
		name      string
		limits    KubeClientLimits
		qps       float32
		burst     int
		wantQPS   float32
		wantBurst int
	}{
		{"none given", KubeClientLimits{}, kube.DefaultClientQPS, kube.DefaultClientBurst, kube.DefaultClientQPS, kube.DefaultClientBurst},
		{"both", KubeClientLimits{QPS: 200, Burst: 400}, kube.DefaultClientQPS, kube.DefaultClientBurst, 200, 400},
		{"qps only", KubeClientLimits{QPS: 120}, 5, 10, 120, 10},
		{"burst only", KubeClientLimits{Burst: 300}, 5, 10, 5, 300},
	} {
		rc := &rest.Config{QPS: tc.qps, Burst: tc.burst}
		tc.limits.apply(rc)
		if rc.QPS != tc.wantQPS || rc.Burst != tc.wantBurst {
			t.Errorf("%s: QPS %g burst %d, want %g and %d", tc.name, rc.QPS, rc.Burst, tc.wantQPS, tc.wantBurst)
		}
	}
}
