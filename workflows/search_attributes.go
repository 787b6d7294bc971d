package workflows

import (
	"sort"

	"go.temporal.io/sdk/temporal"
)

// PhaseKey and the other typed search attribute keys.
var (
	WorkspaceKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrWorkspace)
	KindKey      = temporal.NewSearchAttributeKeyKeyword(SearchAttrKind)
	PhaseKey     = temporal.NewSearchAttributeKeyKeyword(SearchAttrPhase)
	NameKey      = temporal.NewSearchAttributeKeyKeyword(SearchAttrName)
	FrameworkKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrFramework)
	LabelsKey    = temporal.NewSearchAttributeKeyKeywordList(SearchAttrLabels)
	// OwnerKey is who started the workflow (the API token's name); children inherit it.
	OwnerKey = temporal.NewSearchAttributeKeyKeyword(SearchAttrOwner)
)

// LabelKeywords are a job's labels as sorted "key=value" keywords (the DlcLabels search
// attribute).
func LabelKeywords(labels map[string]string) []string {
	out := make([]string, 0, len(labels))
	for k, v := range labels {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
