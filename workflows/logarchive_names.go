package workflows

// Log archive: when a job ends, its log records are copied from the log stream to S3
// (package logarchive), where `dlc job logs` reads them once the stream has dropped them.
const (
	// ActivityArchiveLogs writes a finished job's logs to its workspace's location
	// (activities.ArchiveLogsInput → activities.ArchiveLogsResult).
	ActivityArchiveLogs = "ArchiveLogs"
)
