package main

// Help of the log archive's flags (`dlc up`, `dlc server`, `dlc worker`).
const (
	logArchiveRootUsage = "where workspaces without storage locations archive finished jobs' logs: ROOT/WORKSPACE/logs/ " +
		"(s3://bucket[/prefix]; default --storage-root; workspaces with locations archive under their first)"
	logArchiveRetentionUsage = "delete finished jobs' log archives this long after they were written (0: keep them); " +
		"the API process sweeps every hour"
)

const (
	runsDatabaseUsage = "keep run records (history, lineage, usage) in this database: postgres://USER@HOST/DB " +
		"(the password from PGPASSWORD or a .pgpass file) or sqlite:PATH; default: no records"
	runsRetentionUsage = "delete run records this long after their run ended (0: keep them)"
)
