package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opendlc/opendlc/schemas"
)

// Backend runs a gang: every replica of one attempt of a job, somewhere. The local backend
// runs processes; the kubernetes backend runs pods. Every method is idempotent, so an
// activity that is retried after a worker crash never duplicates a replica.
type Backend interface {
	// Name is "local" or "kubernetes".
	Name() string
	// Launch creates every replica of the gang that does not exist yet. A replica that
	// already exists (same name) counts as created.
	Launch(ctx context.Context, gang GangSpec) error
	// Observe returns the state of every replica of the gang, in GangSpec order. A gang
	// the backend has never seen returns ErrGangNotFound.
	Observe(ctx context.Context, ref GangRef) (GangStatus, error)
	// Stop kills every replica of the gang. Stopping a finished or unknown gang is not
	// an error.
	Stop(ctx context.Context, ref GangRef) error
	// Cleanup removes whatever the gang left behind (pods, services, files). Logs
	// already forwarded are kept elsewhere.
	Cleanup(ctx context.Context, ref GangRef) error
	// FollowLogs calls fn for each log line of one replica, starting after line number
	// afterSeq (0: from the start), in order, and returns when the replica has finished
	// and its output is drained, or when ctx ends.
	FollowLogs(ctx context.Context, ref GangRef, replica string, afterSeq int64, fn func(LogLine) error) error
}

// ErrGangNotFound is returned by Observe for a gang the backend does not know.
var ErrGangNotFound = errors.New("backend: gang not found")

// ErrInvalidSpec marks an error that retrying cannot fix: the gang cannot be run as
// written. Test for it with errors.Is; the activities turn it into a non-retryable
// Temporal error, so backends never build Temporal errors themselves.
var ErrInvalidSpec = errors.New("backend: invalid spec")

// InvalidSpec marks err as a spec problem (errors.Is(err, ErrInvalidSpec) holds); its
// message is err's.
func InvalidSpec(err error) error { return invalidSpecError{err} }

type invalidSpecError struct{ err error }

func (e invalidSpecError) Error() string   { return e.err.Error() }
func (e invalidSpecError) Unwrap() []error { return []error{e.err, ErrInvalidSpec} }

// ErrInsufficientResources marks a Launch refused for now because the gang does not fit
// in what is free (the local backend's GPUs): nothing was started, and the same Launch
// may succeed once other gangs have ended. Its message says what the gang waits for.
// The activities turn it into a non-retryable Temporal error of type
// InsufficientResources, and the job waits Queued with that message and tries again.
var ErrInsufficientResources = errors.New("backend: insufficient resources")

// InsufficientResources marks err as a capacity problem (errors.Is(err,
// ErrInsufficientResources) holds); its message is err's.
func InsufficientResources(err error) error { return insufficientError{err} }

type insufficientError struct{ err error }

func (e insufficientError) Error() string   { return e.err.Error() }
func (e insufficientError) Unwrap() []error { return []error{e.err, ErrInsufficientResources} }

// GangRef names one attempt of one job.
type GangRef struct {
	Workspace string `json:"workspace"`
	Job       string `json:"job"`
	Attempt   int    `json:"attempt"`
	// Namespace is the Kubernetes namespace of the workspace, as the workspace
	// registry said when the job started; empty, the kubernetes backend maps the
	// workspace to one itself. It is not part of the gang's identity (ID).
	Namespace string `json:"namespace,omitempty"`
}

// ID is the gang's deterministic identifier: <workspace>.<job>.a<attempt>.
func (r GangRef) ID() string { return fmt.Sprintf("%s.%s.a%d", r.Workspace, r.Job, r.Attempt) }

// ReplicaName is the deterministic name of a replica: <job>-<role>-<index>-a<attempt>.
func (r GangRef) ReplicaName(role string, index int) string {
	return fmt.Sprintf("%s-%s-%d-a%d", r.Job, role, index, r.Attempt)
}

// GangSpec is everything a backend needs to create a gang. The activity layer fills in
// the framework-agnostic DLC_* environment; the backend adds the framework's rendezvous
// environment, because only it knows the replicas' addresses.
type GangSpec struct {
	GangRef
	Framework schemas.Framework `json:"framework"`
	Image     string            `json:"image,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Pool and Priority are the job's resource pool and priority
	// (spec.resources); the kubernetes backend maps pools to node selectors,
	// tolerations and priority classes.
	Pool     schemas.Pool `json:"pool,omitempty"`
	Priority int32        `json:"priority,omitempty"`
	// Elastic, when set, bounds the number of nodes of an elastic PyTorch job.
	Elastic *schemas.ElasticSpec `json:"elastic,omitempty"`
	// EnvFromSecrets name Secrets whose keys become every replica's environment
	// (kubernetes backend; the local backend refuses them).
	EnvFromSecrets []string `json:"envFromSecrets,omitempty"`
	// Annotations are the job's annotations; the kubernetes backend puts them on pods.
	Annotations map[string]string `json:"annotations,omitempty"`
	// ExcludeNodes are nodes the gang must not run on (failed or unhealthy nodes);
	// the kubernetes backend turns them into node affinity.
	ExcludeNodes []string `json:"excludeNodes,omitempty"`
	// Data are the job's data sources: the kubernetes backend mounts their PVCs and
	// passes their Secrets' credentials; every backend passes DLC_DATA_<NAME>.
	Data []schemas.DataSource `json:"data,omitempty"`
	// Pod holds the job's pod settings (spec.pod): the kubernetes backend applies them
	// within its pool policy; the local backend ignores them.
	Pod *schemas.PodOptions `json:"pod,omitempty"`
	// PodDefaults are the workspace's pod defaults: the kubernetes backend applies
	// them where the job's Pod sets nothing, before the pool's and its own.
	PodDefaults *schemas.PodDefaults `json:"podDefaults,omitempty"`
	Replicas    []ReplicaSpec        `json:"replicas"`
	// PlacementTimeout is the job's spec.resources.placementTimeout (0 when unset):
	// the kubernetes backend gives it to a batch scheduler that bounds how long a
	// partly placed gang may hold what it has (coscheduling's PodGroup).
	PlacementTimeout time.Duration `json:"placementTimeout,omitempty"`
}

// ReplicaSpec is one process or pod of a gang.
type ReplicaSpec struct {
	Name  string `json:"name"`
	Role  string `json:"role"`
	Index int    `json:"index"`
	// Command is the full argv (command then args).
	Command      []string             `json:"command"`
	Env          []schemas.EnvVar     `json:"env,omitempty"`
	WorkingDir   string               `json:"workingDir,omitempty"`
	Resources    schemas.Resources    `json:"resources,omitempty"`
	NodeSelector map[string]string    `json:"nodeSelector,omitempty"`
	Tolerations  []schemas.Toleration `json:"tolerations,omitempty"`
}

// GangStatus is a snapshot of a gang's replicas.
type GangStatus struct {
	Replicas []schemas.ReplicaStatus `json:"replicas"`
}

// LogLine is one line a replica wrote.
type LogLine struct {
	Replica string    `json:"replica"`
	Stream  string    `json:"stream"` // stdout or stderr; "stdout" where the backend merges them (local, kubernetes); StreamGap for a gap record
	Seq     int64     `json:"seq"`    // 1-based, per replica, over both streams
	Time    time.Time `json:"time"`
	Line    string    `json:"line"`
}

// WorkingDirs is implemented by a backend whose replicas' working directories the
// worker can read (the local backend): the file metric collectors read there.
type WorkingDirs interface {
	// WorkingDir is where a replica with spec.workingDir wd runs, as a path of the
	// worker's file system; false when the worker must not read files there for the
	// job (the local sandbox, whose replicas cannot write there and whose working
	// directories the worker, as root, could read beyond the workspace's rights).
	WorkingDir(wd string) (string, bool)
}

// ReplicaTmpDirs is implemented by a backend whose replicas' /tmp the worker can read
// (the local backend): a metrics file collector's /tmp/... path is read there.
type ReplicaTmpDirs interface {
	// ReplicaTmpDir is where the replica's /tmp lies on the worker's file system: the
	// replica's own directory in the local sandbox, the host's /tmp without it; false
	// when there is none.
	ReplicaTmpDir(ref GangRef, replica string) (string, bool)
}
