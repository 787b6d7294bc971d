// Package schemas is OpenDLC's domain: the documents users submit (TrainingJob, and later
// Experiment, Schedule, Trigger, Pipeline), their validation, and the status the system
// reports. It does no I/O.
package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/invopop/jsonschema"
)

// APIVersion is the only accepted apiVersion.
const APIVersion = "opendlc.io/v1alpha1"

// Kind names a document kind.
type Kind string

// Document kinds.
const (
	KindTrainingJob Kind = "TrainingJob"
)

// ObjectMeta names a document. Name and workspace are DNS labels so that they can be used
// in Kubernetes names, NATS subjects and Temporal workflow ids unchanged.
type ObjectMeta struct {
	// Name is unique within the workspace for the kind.
	Name string `json:"name" jsonschema:"maxLength=50,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Workspace owns the document; default "default".
	Workspace string `json:"workspace,omitempty" jsonschema:"maxLength=40,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Labels are key/value pairs used for filtering and notification rules, with
	// Kubernetes label syntax: at most 64, keys [prefix/]name, values up to 63 characters.
	Labels map[string]string `json:"labels,omitempty"`
	// Annotations are key/value pairs the system does not interpret: at most 64, keys
	// [prefix/]name, values up to 4096 characters.
	Annotations map[string]string `json:"annotations,omitempty"`
}

// DefaultWorkspace is used when metadata.workspace is empty.
const DefaultWorkspace = "default"

// Framework selects a job's rendezvous environment and success rule.
type Framework string

// Frameworks.
const (
	FrameworkPyTorch    Framework = "pytorch"
	FrameworkDeepSpeed  Framework = "deepspeed"
	FrameworkMegatron   Framework = "megatron"
	FrameworkTensorFlow Framework = "tensorflow"
	FrameworkMPI        Framework = "mpi"
	FrameworkXGBoost    Framework = "xgboost"
	FrameworkPaddle     Framework = "paddle"
	FrameworkRay        Framework = "ray"
	FrameworkSlurm      Framework = "slurm"
	FrameworkPreprocess Framework = "preprocess"
	FrameworkInference  Framework = "inference"
	FrameworkCustom     Framework = "custom"
)

// Frameworks lists every framework in a stable order.
var Frameworks = []Framework{FrameworkPyTorch, FrameworkDeepSpeed, FrameworkMegatron,
	FrameworkTensorFlow, FrameworkMPI, FrameworkXGBoost, FrameworkPaddle, FrameworkRay,
	FrameworkSlurm, FrameworkPreprocess, FrameworkInference, FrameworkCustom}

// JSONSchema lists the frameworks as an enum.
func (Framework) JSONSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, f := range Frameworks {
		s.Enum = append(s.Enum, string(f))
	}
	return s
}

// Pool is a resource pool.
type Pool string

// Resource pools.
const (
	// PoolQuota is the workspace's reserved capacity; its jobs count against the
	// workspace quota and wait in Queued while it is full.
	PoolQuota Pool = "quota"
	// PoolPublic is shared capacity, not counted against the workspace quota.
	PoolPublic Pool = "public"
	// PoolSpot is preemptible spot capacity; preemptions are recovered.
	PoolSpot Pool = "spot"
	// PoolIdle runs on capacity that is reserved but idle, at low priority: not
	// counted against the quota, and preempted (then recovered) when the owners of
	// the capacity need it. The cluster maps it to a low PriorityClass.
	PoolIdle Pool = "idle"
)

// Pools lists every pool in a stable order.
var Pools = []Pool{PoolQuota, PoolPublic, PoolSpot, PoolIdle}

// JSONSchema lists the pools as an enum.
func (Pool) JSONSchema() *jsonschema.Schema {
	s := &jsonschema.Schema{Type: "string"}
	for _, p := range Pools {
		s.Enum = append(s.Enum, string(p))
	}
	return s
}

// Duration is a time.Duration written as a Go duration string ("90s", "10m", "72h").
type Duration time.Duration

// D returns the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string. null leaves the duration unchanged, as
// encoding/json does for other types.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("must be a duration string such as \"10m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("invalid duration %q: must look like \"90s\", \"10m\" or \"72h\"", s)
	}
	*d = Duration(v)
	return nil
}

// JSONSchema describes the duration string.
func (Duration) JSONSchema() *jsonschema.Schema {
	return &jsonschema.Schema{
		Type:        "string",
		Pattern:     `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`,
		Description: "a duration such as 90s, 10m or 72h",
	}
}
