package schemas

import (
	"fmt"
	"strings"
)

// Name rules for values that arrive outside a document: the path and query parameters
// of the HTTP API. Each check returns "" for a valid value, else what is expected, in
// words.

// Bounds of names.
const (
	// MaxWorkspaceLength bounds a workspace name (metadata.workspace, the registry).
	MaxWorkspaceLength = 40
	// MaxObjectNameLength bounds the name of an object the API serves: a DNS label. A
	// document's metadata.name is at most 50 characters; names the control plane
	// derives from it (a pipeline step's job, a trial's) may be longer.
	MaxObjectNameLength = 63
)

// CheckWorkspaceName checks a workspace name: a DNS label of at most
// MaxWorkspaceLength characters.
func CheckWorkspaceName(s string) string {
	if len(s) > MaxWorkspaceLength || !dnsLabelRE.MatchString(s) {
		return fmt.Sprintf("must be a workspace name: a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit) of at most %d characters", MaxWorkspaceLength)
	}
	return ""
}

// CheckObjectName checks the name of a job, experiment, pipeline, schedule, trigger,
// rule or token: a DNS label of at most MaxObjectNameLength characters.
func CheckObjectName(s string) string {
	if len(s) > MaxObjectNameLength || !dnsLabelRE.MatchString(s) {
		return fmt.Sprintf("must be a name: a DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit) of at most %d characters", MaxObjectNameLength)
	}
	return ""
}

// CheckLabelFilter checks a label filter, key=value, with the syntax of labels.
func CheckLabelFilter(kv string) string {
	k, v, ok := strings.Cut(kv, "=")
	if !ok {
		return "must be key=value"
	}
	if msg := validateQualifiedName(k); msg != "" {
		return msg
	}
	return validateLabelValue(v)
}
