package workflows

// Versioning of workflow logic. Nothing ran in production before the first version,
// so it carries no compatibility branch: the histories in testdata were recorded at it.
// Every later change to workflow logic that running workflows' histories may predate
// goes behind workflow.GetVersion, with its change id in versions (the one table of
// change ids; docs/architecture.md's "Versioned changes" table lists the same rows, and
// TestVersionsTable checks both, and that every change id passed to
// workflow.GetVersion is in it) and a history recorded from the new code.

// firstVersion is the day of the first version (YYYY-MM-DD).
const firstVersion = "2026-12-01"

// change is one versioned change to workflow logic.
type change struct {
	// id is the change id passed to workflow.GetVersion: a constant, never reused.
	id string
	// since is the day the change was made (YYYY-MM-DD), not before firstVersion.
	since string
	// what the new branch does, and the history or test that covers it.
	what string
}

// versions lists every versioned change, oldest first. Empty at the first version.
var versions = []change{
	{id: changeWorkspaceConfig, since: "2026-12-02", what: "a job reads its workspace's namespace and pod defaults from the registry " +
		"(activity ResolveWorkspace) when it starts, and runs every gang there; covered by integration/kube TestWorkspaceNamespaceAndPodDefaults"},
}
