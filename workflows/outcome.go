package workflows

// outcome is how something ends, or the state it moves to: a phase (a job's, an
// experiment's, a pipeline run's) with the reason and the message that its status,
// timeline and events record. Workflows pass outcomes, not (phase, reason, message).
type outcome[P ~string] struct {
	phase   P
	reason  string
	message string
}
