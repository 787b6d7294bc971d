package workflows

// Elastic jobs (training_job_elastic.go): a running elastic job is scaled through an
// update, and a lost replica of one is replaced alone.
const (
	// UpdateScale changes an elastic job's replica count (ScaleRequest → ScaleResult).
	UpdateScale = "scale"
	// ActivityScaleGang brings a running gang to a new replica count
	// (activities.ScaleGangInput → activities.ElasticResult).
	ActivityScaleGang = "ScaleGang"
	// ActivityReplaceReplica replaces one replica of a running gang
	// (activities.ReplaceReplicaInput → activities.ElasticResult).
	ActivityReplaceReplica = "ReplaceReplica"
)
