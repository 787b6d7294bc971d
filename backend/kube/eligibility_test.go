package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// A pod is eligible for the nodes its node selector, its required node affinity (over
// labels and over fields) and its tolerations admit; a taint the caller does not count
// keeps no pod off.
func TestEligibleNodes(t *testing.T) {
	nodes := []*corev1.Node{
		testNode("a").label("zone", "east").obj(),
		testNode("b").label("zone", "west").obj(),
		testNode("c").label("zone", "east").taint("dedicated", "infer", corev1.TaintEffectNoSchedule).obj(),
		testNode("d").label("zone", "east").taint("dedicated", "train", corev1.TaintEffectNoSchedule).obj(),
		testNode("e").label("zone", "east").taint(transientTaintPrefix+"not-ready", "", corev1.TaintEffectNoExecute).obj(),
		testNode("f").label("zone", "east").taint("soft", "", corev1.TaintEffectPreferNoSchedule).obj(),
		testNode("g").label("zone", "east").label("gpu", "a100").obj(),
	}
	affinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	tests := map[string]struct {
		spec   corev1.PodSpec
		counts func(*corev1.Taint) bool
		want   []string
	}{
		"no constraints, lasting taints count": {counts: lastingTaint, want: []string{"a", "b", "e", "f", "g"}},
		"every taint counts": {
			counts: func(*corev1.Taint) bool { return true },
			want:   []string{"a", "b", "g"},
		},
		"a node selector": {
			spec: corev1.PodSpec{NodeSelector: map[string]string{"gpu": "a100"}}, counts: lastingTaint, want: []string{"g"},
		},
		"a toleration": {
			spec:   corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infer", Effect: corev1.TaintEffectNoSchedule}}},
			counts: lastingTaint, want: []string{"a", "b", "c", "e", "f", "g"},
		},
		"required affinity on a label": {
			spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"east"}},
			}})},
			counts: lastingTaint, want: []string{"b"},
		},
		"required affinity on the node's name": {
			spec: corev1.PodSpec{Affinity: affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}},
				{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"g"}},
			}})},
			counts: lastingTaint, want: []string{"b", "e", "f"},
		},
		"either of two affinity terms": {
			spec: corev1.PodSpec{Affinity: affinity(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"west"}}}},
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}},
			)},
			counts: lastingTaint, want: []string{"b", "g"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, n := range eligibleNodes(&corev1.Pod{Spec: tt.spec}, nodes, tt.counts) {
				got = append(got, n.Name)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("eligible nodes (-want +got):\n%s", diff)
			}
		})
	}
}
