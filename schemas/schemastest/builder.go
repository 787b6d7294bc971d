// Package schemastest builds schemas documents for tests:
//
//	job := schemastest.Job("resnet").Framework(schemas.FrameworkPyTorch).Role("worker", 2).GPUs(8).Obj()
//
// Job starts from a valid TrainingJob; each method changes one thing and returns the
// builder. Role-level methods (GPUs, CPU, Memory, RoleCommand, ...) apply to the role
// most recently named by Role, "worker" at first.
package schemastest

import (
	"encoding/json"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/schemas"
)

// CmpOpts lets cmp.Diff compare documents: resource.Quantity values are equal when they
// are the same amount ("1" and "1000m").
var CmpOpts = cmp.Options{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
}

// JobBuilder builds a TrainingJob. Its zero value is not usable; call Job.
type JobBuilder struct {
	job  schemas.TrainingJob
	role string
}

// Job returns a builder of a valid pytorch TrainingJob named name in the default
// workspace, running "python train.py" with one worker.
func Job(name string) *JobBuilder {
	return &JobBuilder{
		job: schemas.TrainingJob{
			APIVersion: schemas.APIVersion,
			Kind:       schemas.KindTrainingJob,
			Metadata:   schemas.ObjectMeta{Name: name, Workspace: schemas.DefaultWorkspace},
			Spec: schemas.TrainingJobSpec{
				Framework: schemas.FrameworkPyTorch,
				Image:     "registry.local/train:1.0",
				Command:   []string{"python", "train.py"},
				Roles:     map[string]schemas.RoleSpec{"worker": {Replicas: 1}},
			},
		},
		role: "worker",
	}
}

// Obj returns a copy of the job built so far; the builder can go on being used.
func (b *JobBuilder) Obj() *schemas.TrainingJob {
	data, err := json.Marshal(&b.job)
	if err != nil {
		panic("schemastest: " + err.Error())
	}
	var out schemas.TrainingJob
	if err := json.Unmarshal(data, &out); err != nil {
		panic("schemastest: " + err.Error())
	}
	return &out
}

// JSON returns the job as a JSON document.
func (b *JobBuilder) JSON() []byte {
	data, err := json.Marshal(&b.job)
	if err != nil {
		panic("schemastest: " + err.Error())
	}
	return data
}

// Mutate applies f to the job, for changes no other method makes.
func (b *JobBuilder) Mutate(f func(*schemas.TrainingJob)) *JobBuilder {
	f(&b.job)
	return b
}

// Name sets metadata.name.
func (b *JobBuilder) Name(name string) *JobBuilder {
	b.job.Metadata.Name = name
	return b
}

// Workspace sets metadata.workspace.
func (b *JobBuilder) Workspace(ws string) *JobBuilder {
	b.job.Metadata.Workspace = ws
	return b
}

// Label sets one label.
func (b *JobBuilder) Label(key, value string) *JobBuilder {
	if b.job.Metadata.Labels == nil {
		b.job.Metadata.Labels = map[string]string{}
	}
	b.job.Metadata.Labels[key] = value
	return b
}

// Annotation sets one annotation.
func (b *JobBuilder) Annotation(key, value string) *JobBuilder {
	if b.job.Metadata.Annotations == nil {
		b.job.Metadata.Annotations = map[string]string{}
	}
	b.job.Metadata.Annotations[key] = value
	return b
}

// Framework sets spec.framework.
func (b *JobBuilder) Framework(f schemas.Framework) *JobBuilder {
	b.job.Spec.Framework = f
	return b
}

// Image sets spec.image.
func (b *JobBuilder) Image(image string) *JobBuilder {
	b.job.Spec.Image = image
	return b
}

// Command sets spec.command; no arguments clears it.
func (b *JobBuilder) Command(cmd ...string) *JobBuilder {
	b.job.Spec.Command = cmd
	return b
}

// Args sets spec.args.
func (b *JobBuilder) Args(args ...string) *JobBuilder {
	b.job.Spec.Args = args
	return b
}

// Env adds a variable to spec.env.
func (b *JobBuilder) Env(name, value string) *JobBuilder {
	b.job.Spec.Env = append(b.job.Spec.Env, schemas.EnvVar{Name: name, Value: value})
	return b
}

// WorkingDir sets spec.workingDir.
func (b *JobBuilder) WorkingDir(dir string) *JobBuilder {
	b.job.Spec.WorkingDir = dir
	return b
}

// Role adds the role name with the given replicas, or sets the replicas of an existing
// one, and makes it the role that role-level methods change.
func (b *JobBuilder) Role(name string, replicas int32) *JobBuilder {
	if b.job.Spec.Roles == nil {
		b.job.Spec.Roles = map[string]schemas.RoleSpec{}
	}
	r := b.job.Spec.Roles[name]
	r.Replicas = replicas
	b.job.Spec.Roles[name] = r
	b.role = name
	return b
}

// WithoutRole removes a role, such as the initial "worker".
func (b *JobBuilder) WithoutRole(name string) *JobBuilder {
	delete(b.job.Spec.Roles, name)
	return b
}

// WithoutRoles removes every role.
func (b *JobBuilder) WithoutRoles() *JobBuilder {
	b.job.Spec.Roles = map[string]schemas.RoleSpec{}
	return b
}

func (b *JobBuilder) updateRole(f func(*schemas.RoleSpec)) *JobBuilder {
	if b.job.Spec.Roles == nil {
		b.job.Spec.Roles = map[string]schemas.RoleSpec{}
	}
	r := b.job.Spec.Roles[b.role]
	f(&r)
	b.job.Spec.Roles[b.role] = r
	return b
}

// Replicas sets the current role's replicas.
func (b *JobBuilder) Replicas(n int32) *JobBuilder {
	return b.updateRole(func(r *schemas.RoleSpec) { r.Replicas = n })
}

// GPUs sets the current role's GPUs per replica.
func (b *JobBuilder) GPUs(n int32) *JobBuilder {
	return b.updateRole(func(r *schemas.RoleSpec) { r.Resources.GPU = n })
}

// CPU sets the current role's CPU per replica, a quantity such as "8" or "500m".
func (b *JobBuilder) CPU(q string) *JobBuilder {
	v := resource.MustParse(q)
	return b.updateRole(func(r *schemas.RoleSpec) { r.Resources.CPU = &v })
}

// Memory sets the current role's memory per replica, a quantity such as "64Gi".
func (b *JobBuilder) Memory(q string) *JobBuilder {
	v := resource.MustParse(q)
	return b.updateRole(func(r *schemas.RoleSpec) { r.Resources.Memory = &v })
}

// RoleCommand sets the current role's own command.
func (b *JobBuilder) RoleCommand(cmd ...string) *JobBuilder {
	return b.updateRole(func(r *schemas.RoleSpec) { r.Command = cmd })
}

// RoleEnv adds a variable to the current role's env.
func (b *JobBuilder) RoleEnv(name, value string) *JobBuilder {
	return b.updateRole(func(r *schemas.RoleSpec) {
		r.Env = append(r.Env, schemas.EnvVar{Name: name, Value: value})
	})
}

// NodeSelector sets one node selector entry of the current role.
func (b *JobBuilder) NodeSelector(key, value string) *JobBuilder {
	return b.updateRole(func(r *schemas.RoleSpec) {
		if r.NodeSelector == nil {
			r.NodeSelector = map[string]string{}
		}
		r.NodeSelector[key] = value
	})
}

// Toleration adds a toleration to the current role.
func (b *JobBuilder) Toleration(t schemas.Toleration) *JobBuilder {
	return b.updateRole(func(r *schemas.RoleSpec) { r.Tolerations = append(r.Tolerations, t) })
}

// Pool sets spec.resources.pool.
func (b *JobBuilder) Pool(p schemas.Pool) *JobBuilder {
	b.job.Spec.Resources.Pool = p
	return b
}

// Priority sets spec.resources.priority.
func (b *JobBuilder) Priority(p int32) *JobBuilder {
	b.job.Spec.Resources.Priority = p
	return b
}

// MaxRestarts sets spec.faultTolerance.maxRestarts.
func (b *JobBuilder) MaxRestarts(n int32) *JobBuilder {
	b.job.Spec.FaultTolerance.MaxRestarts = n
	return b
}

// HangTimeout sets spec.faultTolerance.hangTimeout.
func (b *JobBuilder) HangTimeout(d time.Duration) *JobBuilder {
	b.job.Spec.FaultTolerance.HangTimeout = schemas.Duration(d)
	return b
}

// HealthCheck enables the health check with the given timeout.
func (b *JobBuilder) HealthCheck(timeout time.Duration) *JobBuilder {
	b.job.Spec.HealthCheck = schemas.HealthCheck{Enabled: true, Timeout: schemas.Duration(timeout)}
	return b
}

// Checkpoint sets spec.checkpoint.
func (b *JobBuilder) Checkpoint(uri string, every time.Duration, keep int32) *JobBuilder {
	b.job.Spec.Checkpoint = &schemas.CheckpointSpec{URI: uri, Every: schemas.Duration(every), Keep: keep}
	return b
}

// Data adds a data source to spec.data.
func (b *JobBuilder) Data(name, uri, mountPath string) *JobBuilder {
	b.job.Spec.Data = append(b.job.Spec.Data, schemas.DataSource{Name: name, URI: uri, MountPath: mountPath})
	return b
}

// ForwardLogs sets spec.logs.forward.
func (b *JobBuilder) ForwardLogs(forward bool) *JobBuilder {
	b.job.Spec.Logs.Forward = &forward
	return b
}

// Timeout sets spec.timeout.
func (b *JobBuilder) Timeout(d time.Duration) *JobBuilder {
	b.job.Spec.Timeout = schemas.Duration(d)
	return b
}
