package schemas

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// TrainingJob is a training (or preprocessing, or offline inference) job: a gang of
// replicas, grouped in roles, that run one framework's program to completion.
type TrainingJob struct {
	// APIVersion must be opendlc.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be TrainingJob.
	Kind Kind `json:"kind"`
	// Metadata names the job and its workspace.
	Metadata ObjectMeta `json:"metadata"`
	// Spec is what the user asks to run.
	Spec TrainingJobSpec `json:"spec"`
}

// TrainingJobSpec describes what a TrainingJob runs and how it is kept alive.
type TrainingJobSpec struct {
	// Framework selects the rendezvous environment and the success rule.
	Framework Framework `json:"framework"`
	// Image is the container image (kubernetes backend). The local backend ignores it.
	Image string `json:"image,omitempty" jsonschema:"maxLength=512"`
	// Command is the entrypoint run in every replica; required unless every role sets its
	// own. "${params.NAME}" is replaced by a hyper-parameter value for HPO trials.
	Command []string `json:"command,omitempty" jsonschema:"maxItems=256,maxLength=4096"`
	// Args are appended to Command.
	Args []string `json:"args,omitempty" jsonschema:"maxItems=256,maxLength=4096"`
	// Env is added to every replica's environment.
	Env []EnvVar `json:"env,omitempty" jsonschema:"maxItems=128"`
	// EnvFromSecrets names Secrets (in the workspace's namespace) whose keys become
	// environment variables of every replica (kubernetes backend), so credentials never
	// appear in the spec or in the job's history.
	EnvFromSecrets []string `json:"envFromSecrets,omitempty" jsonschema:"maxItems=16"`
	// WorkingDir is the replica's working directory. The local backend resolves a relative
	// path against the worker's working directory.
	WorkingDir string `json:"workingDir,omitempty" jsonschema:"maxLength=1024"`
	// Roles maps a role name (master, worker, chief, ps, launcher, head...) to its replicas.
	Roles map[string]RoleSpec `json:"roles"`
	// Elastic lets a PyTorch-family job run with between MinReplicas and MaxReplicas
	// nodes: torchrun's elastic rendezvous (c10d) instead of a fixed world size.
	Elastic *ElasticSpec `json:"elastic,omitempty"`
	// Resources selects the resource pool and priority.
	Resources PoolSpec `json:"resources,omitempty,omitzero"`
	// FaultTolerance says how failures are retried.
	FaultTolerance FaultTolerance `json:"faultTolerance,omitempty,omitzero"`
	// HealthCheck configures the pre-flight node health check.
	HealthCheck HealthCheck `json:"healthCheck,omitempty,omitzero"`
	// Checkpoint is where the job's checkpoints live.
	Checkpoint *CheckpointSpec `json:"checkpoint,omitempty"`
	// Data are data sets mounted or made known to every replica.
	Data []DataSource `json:"data,omitempty" jsonschema:"maxItems=32"`
	// Logs configures log forwarding.
	Logs LogSpec `json:"logs,omitempty,omitzero"`
	// Metrics adds metric collectors (regular expressions over the output, metrics
	// files) to OpenDLC's own metric lines.
	Metrics *MetricsSpec `json:"metrics,omitempty"`
	// Pod sets what the job's pods get beyond their containers: service account, image
	// pull secrets, /dev/shm size, volumes and host networking (kubernetes backend;
	// the local backend ignores it).
	Pod *PodOptions `json:"pod,omitempty"`
	// Timeout bounds the job's run time, counted from its first launch: time spent
	// Queued (waiting for quota, capacity or placement) does not count. Zero means no
	// limit.
	Timeout Duration `json:"timeout,omitempty"`
	// QueueTimeout bounds the time the job may spend Queued, in all: a job that waited
	// longer fails with reason QueueTimeout. Zero means it may wait for ever.
	QueueTimeout Duration `json:"queueTimeout,omitempty"`
}

// RoleSpec is one role of a job: how many replicas and what each gets.
type RoleSpec struct {
	// Replicas is the number of processes or pods of this role.
	Replicas int32 `json:"replicas" jsonschema:"minimum=1,maximum=1024"`
	// Resources each replica requests.
	Resources Resources `json:"resources,omitempty,omitzero"`
	// Command overrides the job's command for this role.
	Command []string `json:"command,omitempty" jsonschema:"maxItems=256,maxLength=4096"`
	// Args overrides the job's args for this role.
	Args []string `json:"args,omitempty" jsonschema:"maxItems=256,maxLength=4096"`
	// Env is added to (and overrides) the job's env for this role.
	Env []EnvVar `json:"env,omitempty" jsonschema:"maxItems=128"`
	// NodeSelector constrains where this role's pods run (kubernetes backend).
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Tolerations let this role's pods run on tainted nodes (kubernetes backend).
	Tolerations []Toleration `json:"tolerations,omitempty" jsonschema:"maxItems=32"`
}

// Resources are what one replica requests. CPU and Memory are Kubernetes quantities
// ("8", "500m", "64Gi").
type Resources struct {
	// CPU is the number of cores, such as "8" or "500m".
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory is bytes, such as "64Gi".
	Memory *resource.Quantity `json:"memory,omitempty"`
	// GPU is the number of whole GPUs (nvidia.com/gpu).
	GPU int32 `json:"gpu,omitempty" jsonschema:"minimum=0,maximum=64"`
	// Extended are other extended resources by name, such as rdma/hca or a vendor's
	// devices, each a whole number (kubernetes backend). The worker's pool policy
	// lists the names a pool allows.
	Extended map[string]resource.Quantity `json:"extended,omitempty"`
}

// EnvVar is one environment variable.
type EnvVar struct {
	// Name is a C identifier, unique within its list.
	Name string `json:"name" jsonschema:"maxLength=256,pattern=^[A-Za-z_][A-Za-z0-9_]*$"`
	// Value may be empty.
	Value string `json:"value,omitempty" jsonschema:"maxLength=32768"`
}

// Toleration mirrors a Kubernetes pod toleration.
type Toleration struct {
	// Key is the taint key; empty matches every key and needs operator Exists.
	Key string `json:"key,omitempty" jsonschema:"maxLength=317"`
	// Operator is Equal (the default) or Exists.
	Operator string `json:"operator,omitempty" jsonschema:"enum=Exists,enum=Equal"`
	// Value is the taint value; empty for operator Exists.
	Value string `json:"value,omitempty" jsonschema:"maxLength=63"`
	// Effect is the taint effect to tolerate; empty tolerates every effect.
	Effect string `json:"effect,omitempty" jsonschema:"enum=NoSchedule,enum=PreferNoSchedule,enum=NoExecute"`
}

// PoolSpec selects where and how urgently a job runs.
type PoolSpec struct {
	// Pool is quota (the workspace's reserved capacity), public (shared) or spot
	// (preemptible). Default quota.
	Pool Pool `json:"pool,omitempty"`
	// Priority orders queued jobs; higher runs first.
	Priority int32 `json:"priority,omitempty" jsonschema:"minimum=-1000,maximum=1000"`
	// PlacementTimeout bounds how long an attempt may wait for all its replicas to run
	// (gang placement): when it passes, every replica is released and the job waits in
	// Queued before trying again, so a partly placed job never holds GPUs. Zero waits
	// forever.
	PlacementTimeout Duration `json:"placementTimeout,omitempty"`
	// SpotFallback moves a spot job to the public pool after repeated preemptions or
	// a long wait for spot capacity.
	SpotFallback *SpotFallback `json:"spotFallback,omitempty"`
}

// SpotFallback says when a preempted spot job gives up on spot capacity.
type SpotFallback struct {
	// AfterPreemptions moves the job to public after this many preemptions; zero never.
	AfterPreemptions int32 `json:"afterPreemptions,omitempty" jsonschema:"minimum=0,maximum=1000"`
	// AfterWaiting moves the job to public when it has waited this long for spot
	// capacity (its first launch, or after a preemption) without every replica being
	// scheduled on a node; zero never.
	AfterWaiting Duration `json:"afterWaiting,omitempty"`
}

// ElasticSpec bounds an elastic job's number of nodes (replicas).
type ElasticSpec struct {
	MinReplicas int32 `json:"minReplicas" jsonschema:"minimum=1,maximum=1024"`
	MaxReplicas int32 `json:"maxReplicas" jsonschema:"minimum=1,maximum=1024"`
}

// FaultTolerance says how a job survives failures.
type FaultTolerance struct {
	// MaxRestarts is how many times a failed attempt is restarted. Preemptions do not
	// count (see MaxPreemptions).
	MaxRestarts int32 `json:"maxRestarts,omitempty" jsonschema:"minimum=0,maximum=100"`
	// MaxPreemptions is how many preemptions (spot reclaim, eviction by a
	// higher-priority job) are recovered; default 100.
	MaxPreemptions int32 `json:"maxPreemptions,omitempty" jsonschema:"minimum=0,maximum=10000"`
	// HangTimeout restarts an attempt whose replicas print nothing (no log line, no
	// metric) for this long once they all run. Needs log forwarding.
	HangTimeout Duration `json:"hangTimeout,omitempty"`
	// ExcludeFailedNodes keeps restarted replicas off nodes that failed. Default true.
	ExcludeFailedNodes *bool `json:"excludeFailedNodes,omitempty"`
	// Rules classify failures by exit code or log line before the built-in rules; the
	// first match wins.
	Rules []FailureRule `json:"rules,omitempty" jsonschema:"maxItems=32"`
}

// ExcludesFailedNodes reports whether failed nodes are excluded (the default).
func (f FaultTolerance) ExcludesFailedNodes() bool {
	return f.ExcludeFailedNodes == nil || *f.ExcludeFailedNodes
}

// FailureAction is what a failure rule does.
type FailureAction string

// Failure actions.
const (
	// ActionRetry restarts the job (within maxRestarts).
	ActionRetry FailureAction = "Retry"
	// ActionFail ends the job at once.
	ActionFail FailureAction = "Fail"
)

// FailureRule maps failures to an action: a replica's exit code in ExitCodes, or a log
// line matching LogPattern (a regular expression), or both when both are set.
type FailureRule struct {
	ExitCodes  []int32       `json:"exitCodes,omitempty" jsonschema:"maxItems=64"`
	LogPattern string        `json:"logPattern,omitempty" jsonschema:"maxLength=1024"`
	Action     FailureAction `json:"action" jsonschema:"enum=Retry,enum=Fail"`
}

// HealthCheck configures pre-flight node checks.
type HealthCheck struct {
	// Enabled runs the check before every attempt.
	Enabled bool `json:"enabled,omitempty"`
	// Timeout bounds the check; default 5m when enabled.
	Timeout Duration `json:"timeout,omitempty"`
}

// CheckpointSpec is where and how often a job checkpoints. The training code writes
// <uri>/<step>/... and <uri>/<step>/MANIFEST.json last.
type CheckpointSpec struct {
	// URI is s3://bucket/prefix.
	URI string `json:"uri" jsonschema:"maxLength=1024,pattern=^s3://[a-z0-9][-a-z0-9.]{1\\,61}[a-z0-9]/.+$"`
	// Every is the checkpoint interval the training code is told (DLC_CHECKPOINT_EVERY).
	Every Duration `json:"every,omitempty"`
	// Keep is how many complete checkpoints to retain; zero keeps all.
	Keep int32 `json:"keep,omitempty" jsonschema:"minimum=0"`
	// ResumeFrom is a checkpoint, s3://bucket/prefix/<step>, that the job's first attempt
	// starts from (DLC_RESUME_FROM); empty starts fresh. A schedule with
	// runOptions.resumeFromPreviousCheckpoint sets it to the previous run's checkpoint.
	ResumeFrom string `json:"resumeFrom,omitempty" jsonschema:"maxLength=1100"`
}

// DataSource is a data set a job reads.
type DataSource struct {
	// Name is a DNS label, unique within the job. Each replica gets DLC_DATA_<NAME>.
	Name string `json:"name" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// URI is s3://bucket/prefix, or a local path (local backend). Exactly one of URI
	// and PVC is set.
	URI string `json:"uri,omitempty" jsonschema:"maxLength=1024"`
	// MountPath is the absolute path where the data appears in each replica: a PVC is
	// mounted there; for a URI it is passed as DLC_DATA_<NAME>_PATH.
	MountPath string `json:"mountPath,omitempty" jsonschema:"maxLength=1024"`
	// SecretRef names a Secret (kubernetes backend) holding the credentials of an S3
	// URI under the keys AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and, optionally,
	// AWS_ENDPOINT_URL and AWS_REGION). Replicas get them as
	// DLC_DATA_<NAME>_ACCESS_KEY_ID, _SECRET_ACCESS_KEY, _ENDPOINT and _REGION.
	SecretRef string `json:"secretRef,omitempty" jsonschema:"maxLength=253"`
	// PVC mounts a PersistentVolumeClaim of the job's namespace (a shared file system:
	// NAS, CPFS, Lustre...) at MountPath (kubernetes backend).
	PVC *PVCSource `json:"pvc,omitempty"`
}

// PVCSource is a PersistentVolumeClaim to mount.
type PVCSource struct {
	ClaimName string `json:"claimName" jsonschema:"maxLength=253"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

// PodOptions are settings of a job's pods (kubernetes backend). What reaches beyond the
// pod (host networking, host paths, extended resources) must be allowed by the policy
// of the job's pool in the worker's configuration; a pod the policy refuses is not
// created, and the job fails with a configuration error naming the field.
type PodOptions struct {
	// ServiceAccountName runs the pods as this service account of the workspace's
	// namespace, its token mounted as the account says. Default: the pool's, else the
	// worker's, else the namespace's default account with no token mounted.
	ServiceAccountName string `json:"serviceAccountName,omitempty" jsonschema:"maxLength=253"`
	// ImagePullSecrets name Secrets of the workspace's namespace holding registry
	// credentials; added to the pool's and the worker's.
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty" jsonschema:"maxItems=16"`
	// ShmSize is the size limit of /dev/shm, a memory-backed emptyDir (counted against
	// the container's memory). Default: the worker's, 1Gi unless configured; "0"
	// leaves the container runtime's 64Mi /dev/shm.
	ShmSize *resource.Quantity `json:"shmSize,omitempty"`
	// HostNetwork runs the pods in their node's network namespace (needs the pool
	// policy's allowHostNetwork).
	HostNetwork bool `json:"hostNetwork,omitempty"`
	// Volumes are mounted into every replica.
	Volumes []Volume `json:"volumes,omitempty" jsonschema:"maxItems=32"`
	// SSHAuthMountPath is the directory where the pods of a job whose launcher starts
	// its peers over ssh (mpi) find the gang's key pair (id_rsa, id_rsa.pub,
	// authorized_keys), as an MPIJob's sshAuthMountPath: the .ssh directory of the
	// image's user, such as /home/mpiuser/.ssh for a non-root image. Default: the
	// worker's, /root/.ssh unless configured (mpi-operator's default).
	SSHAuthMountPath string `json:"sshAuthMountPath,omitempty" jsonschema:"maxLength=1024"`
}

// Volume is a volume mounted into every replica: exactly one of EmptyDir, ConfigMap,
// Secret, PVC and HostPath is set.
type Volume struct {
	// Name is a DNS label, unique within the job's volumes.
	Name string `json:"name" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// MountPath is the absolute path where the volume appears.
	MountPath string `json:"mountPath" jsonschema:"maxLength=1024"`
	// ReadOnly mounts the volume read-only.
	ReadOnly bool `json:"readOnly,omitempty"`
	// SubPath mounts this path within the volume instead of its root: relative, no
	// "..".
	SubPath string `json:"subPath,omitempty" jsonschema:"maxLength=1024"`
	// EmptyDir is scratch space that lives as long as the pod.
	EmptyDir *EmptyDirVolume `json:"emptyDir,omitempty"`
	// ConfigMap mounts a ConfigMap of the workspace's namespace, a file per key.
	ConfigMap *ConfigMapVolume `json:"configMap,omitempty"`
	// Secret mounts a Secret of the workspace's namespace, a file per key.
	Secret *SecretVolume `json:"secret,omitempty"`
	// PVC mounts a PersistentVolumeClaim of the workspace's namespace.
	PVC *PVCSource `json:"pvc,omitempty"`
	// HostPath mounts a directory of the node (needs a pool policy allowing the path).
	HostPath *HostPathVolume `json:"hostPath,omitempty"`
}

// EmptyDirVolume is an emptyDir volume.
type EmptyDirVolume struct {
	// Medium is "" (the node's disk) or Memory (tmpfs).
	Medium string `json:"medium,omitempty" jsonschema:"enum=,enum=Memory"`
	// SizeLimit bounds the volume; empty means no limit.
	SizeLimit *resource.Quantity `json:"sizeLimit,omitempty"`
}

// ConfigMapVolume names a ConfigMap.
type ConfigMapVolume struct {
	Name string `json:"name" jsonschema:"maxLength=253"`
	// Items, when set, project only these keys, each to its path; otherwise every
	// key is a file named after it.
	Items []KeyToPath `json:"items,omitempty" jsonschema:"maxItems=64"`
	// DefaultMode is the files' mode bits (0 to 0777; in YAML 0644 is octal, in JSON
	// write the decimal 420). Default 0644.
	DefaultMode *int32 `json:"defaultMode,omitempty" jsonschema:"minimum=0,maximum=511"`
}

// SecretVolume names a Secret.
type SecretVolume struct {
	SecretName string `json:"secretName" jsonschema:"maxLength=253"`
	// Items, when set, project only these keys, each to its path; otherwise every
	// key is a file named after it.
	Items []KeyToPath `json:"items,omitempty" jsonschema:"maxItems=64"`
	// DefaultMode is the files' mode bits (0 to 0777; in YAML 0600 is octal, in JSON
	// write the decimal 384). Default 0644.
	DefaultMode *int32 `json:"defaultMode,omitempty" jsonschema:"minimum=0,maximum=511"`
}

// KeyToPath projects one key of a ConfigMap or Secret to a file of the volume.
type KeyToPath struct {
	// Key is the key to project.
	Key string `json:"key" jsonschema:"maxLength=253"`
	// Path is the file's path relative to the volume: no "..", not absolute.
	Path string `json:"path" jsonschema:"maxLength=1024"`
	// Mode is this file's mode bits (0 to 0777); default the volume's defaultMode.
	Mode *int32 `json:"mode,omitempty" jsonschema:"minimum=0,maximum=511"`
}

// HostPathVolume is a path on the node.
type HostPathVolume struct {
	// Path is an absolute path on the node.
	Path string `json:"path" jsonschema:"maxLength=1024"`
}

// LogSpec configures log forwarding.
type LogSpec struct {
	// Forward publishes every log line to NATS. Default true.
	Forward *bool `json:"forward,omitempty"`
}

// ForwardLogs reports whether log lines are forwarded (the default).
func (l LogSpec) ForwardLogs() bool { return l.Forward == nil || *l.Forward }

// TotalReplicas is the number of replicas over all roles.
func (s *TrainingJobSpec) TotalReplicas() int {
	n := 0
	for _, r := range s.Roles {
		n += int(r.Replicas)
	}
	return n
}
