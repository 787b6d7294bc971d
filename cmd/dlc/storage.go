package main

// storageRootUsage is the help of the server's and the worker's --storage-root.
const storageRootUsage = "s3://BUCKET[/PREFIX]: each workspace may use only ROOT/WORKSPACE/ " +
	"(or its registry entry's storage.locations); documents naming other S3 locations are refused " +
	"at submit and at launch (default: only workspaces whose entry names locations are restricted)"

// storageLocationUsage is the help of `dlc workspace create --storage-location`.
const storageLocationUsage = "an S3 bucket or prefix the workspace's documents may name and its replicas' " +
	"credentials reach, in place of the default STORAGE-ROOT/WORKSPACE/; repeatable"
