package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/backend"
	"k8s.io/apimachinery/pkg/labels"
)

// Labels and annotations OpenDLC puts on the objects it creates. The label values are
// the gang's names, shortened deterministically (see shorten) where Kubernetes's 63
// character limit requires.
const (
	// LabelManagedBy marks every object OpenDLC created; the informers watch only these.
	LabelManagedBy = "opendlc.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "opendlc"
	// LabelWorkspace is the gang's workspace.
	LabelWorkspace = "opendlc.io/workspace"
	// LabelJob is the gang's job name.
	LabelJob = "opendlc.io/job"
	// LabelAttempt is the gang's attempt number.
	LabelAttempt = "opendlc.io/attempt"
	// LabelRole is a pod's role.
	LabelRole = "opendlc.io/role"
	// LabelReplicaIndex is a pod's index within its role.
	LabelReplicaIndex = "opendlc.io/replica-index"
	// LabelGang is the gang's ID (GangRef.ID), the key every gang lookup selects on.
	LabelGang = "opendlc.io/gang"

	// AnnotationReplicas, on the Service, lists the gang's replicas in GangSpec order
	// (JSON), so Observe knows every replica, created or not, with nothing in memory.
	AnnotationReplicas = "opendlc.io/replicas"
	// AnnotationLaunched, on the Service, says Launch created every pod: from then on a
	// missing pod was deleted, not yet to be created.
	AnnotationLaunched = "opendlc.io/launched"
	// AnnotationStopped, on the Service, says the gang was stopped: Launch creates
	// nothing more and Observe reports the replicas that did not finish as Stopped.
	AnnotationStopped = "opendlc.io/stopped"

	// ContainerName is the name of every pod's one container.
	ContainerName = "main"
)

// maxLabel is Kubernetes's limit on a label value and on a DNS label.
const maxLabel = 63

// shorten returns s if it has at most n characters, else a prefix of s and a hash of
// all of s, n characters long: deterministic, so every worker derives the same name,
// and distinct for distinct inputs in practice.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	keep := strings.TrimRight(s[:n-len(h)-1], "-._")
	return keep + "-" + h
}

// namespace is the namespace of a workspace.
func (b *Backend) namespace(workspace string) string {
	return shorten(b.nsPrefix+workspace, maxLabel)
}

// serviceName is the gang's headless Service: <job>-a<attempt>. Service names must
// start with a letter (DNS-1035), job names need not, so a job starting with a digit
// gets a "j-" in front.
func serviceName(ref backend.GangRef) string {
	name := ref.Job + "-a" + strconv.Itoa(ref.Attempt)
	if name[0] < 'a' || name[0] > 'z' {
		name = "j-" + name
	}
	return shorten(name, maxLabel)
}

// hostname is a replica's hostname within its Service: <role>-<index>.
func hostname(role string, index int) string {
	return role + "-" + strconv.Itoa(index)
}

// gangValue is the gang's LabelGang value.
func gangValue(ref backend.GangRef) string {
	return shorten(ref.ID(), maxLabel)
}

// gangSelector selects the gang's objects.
func gangSelector(ref backend.GangRef) labels.Selector {
	return labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedByValue, LabelGang: gangValue(ref)})
}

// gangLabels are the labels of the gang's Service; pods add their role and index. The
// job's own labels come first, so a job cannot override OpenDLC's.
func gangLabels(g backend.GangSpec) map[string]string {
	l := make(map[string]string, len(g.Labels)+6)
	maps.Copy(l, g.Labels)
	l[LabelManagedBy] = ManagedByValue
	l[LabelWorkspace] = shorten(g.Workspace, maxLabel)
	l[LabelJob] = shorten(g.Job, maxLabel)
	l[LabelAttempt] = strconv.Itoa(g.Attempt)
	l[LabelGang] = gangValue(g.GangRef)
	return l
}
