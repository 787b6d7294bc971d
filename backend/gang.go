package backend

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/opendlc/opendlc/schemas"
)

// GangParams are the per-attempt facts that, with the job spec, define a gang.
type GangParams struct {
	Ref GangRef `json:"ref"`
	// UID identifies this job among jobs that ever had the same name.
	UID string `json:"uid"`
	// ResumeFrom is the checkpoint the attempt resumes from; empty on a fresh start.
	ResumeFrom string `json:"resumeFrom,omitempty"`
	// Params are hyper-parameters (HPO trials), passed as DLC_PARAMS; the trial's job
	// spec has them substituted already.
	Params map[string]any `json:"params,omitempty"`
	// ExcludeNodes keeps the attempt off these nodes.
	ExcludeNodes []string `json:"excludeNodes,omitempty"`
	// Pool, when set, overrides spec.resources.pool (a spot job that fell back to
	// public).
	Pool schemas.Pool `json:"pool,omitempty"`
	// PodDefaults are the workspace's pod defaults (the workspace registry's), applied
	// under the job's spec.pod.
	PodDefaults *schemas.PodDefaults `json:"podDefaults,omitempty"`
}

// BuildGang expands a job spec into the gang of one attempt: roles in name order,
// replicas in index order, deterministic names, and the DLC_* environment of the
// training-code contract. The framework's rendezvous environment is added by the
// backend.
func BuildGang(job *schemas.TrainingJob, p GangParams) (GangSpec, error) {
	spec := &job.Spec
	paramsJSON := ""
	if len(p.Params) > 0 {
		b, err := json.Marshal(p.Params)
		if err != nil {
			return GangSpec{}, fmt.Errorf("params: %w", err)
		}
		paramsJSON = string(b)
	}
	if p.ResumeFrom == "" && spec.Checkpoint != nil {
		// A fresh job may be told where to start (spec.checkpoint.resumeFrom); the
		// workflow's own choice, for a restarted attempt, comes first.
		p.ResumeFrom = spec.Checkpoint.ResumeFrom
	}
	roles := make([]string, 0, len(spec.Roles))
	for name := range spec.Roles {
		roles = append(roles, name)
	}
	sort.Strings(roles)

	g := GangSpec{
		GangRef:        p.Ref,
		Framework:      spec.Framework,
		Image:          spec.Image,
		Labels:         job.Metadata.Labels,
		Annotations:    job.Metadata.Annotations,
		Pool:           spec.Resources.Pool,
		ExcludeNodes:   p.ExcludeNodes,
		Data:           spec.Data,
		Pod:            spec.Pod,
		PodDefaults:    p.PodDefaults,
		EnvFromSecrets: spec.EnvFromSecrets,
		Elastic:        spec.Elastic,
		Priority:       spec.Resources.Priority,
	}
	g.PlacementTimeout = spec.Resources.PlacementTimeout.D()
	if p.Pool != "" {
		g.Pool = p.Pool
	}
	for _, role := range roles {
		rs := spec.Roles[role]
		command, args := spec.Command, spec.Args
		if len(rs.Command) > 0 {
			command, args = rs.Command, nil
		}
		if len(rs.Args) > 0 {
			args = rs.Args
		}
		// References were substituted when the job was made (schemas.SubstituteJob): a
		// value that reads like one is an argument as it is.
		argv := append(append([]string{}, command...), args...)
		if len(argv) == 0 {
			return GangSpec{}, fmt.Errorf("spec.roles.%s.command: no command for this role", role)
		}
		for i := 0; i < int(rs.Replicas); i++ {
			env := MergeEnv(spec.Env, rs.Env)
			env = append(env,
				schemas.EnvVar{Name: "DLC_JOB", Value: p.Ref.Job},
				schemas.EnvVar{Name: "DLC_JOB_UID", Value: p.UID},
				schemas.EnvVar{Name: "DLC_WORKSPACE", Value: p.Ref.Workspace},
				schemas.EnvVar{Name: "DLC_ATTEMPT", Value: strconv.Itoa(p.Ref.Attempt)},
				schemas.EnvVar{Name: "DLC_ROLE", Value: role},
				schemas.EnvVar{Name: "DLC_REPLICA", Value: strconv.Itoa(i)},
				schemas.EnvVar{Name: "DLC_REPLICA_NAME", Value: p.Ref.ReplicaName(role, i)},
				schemas.EnvVar{Name: "DLC_RESUME_FROM", Value: p.ResumeFrom},
				schemas.EnvVar{Name: "DLC_PARAMS", Value: paramsJSON},
			)
			if ck := spec.Checkpoint; ck != nil {
				env = append(env,
					schemas.EnvVar{Name: "DLC_CHECKPOINT_URI", Value: ck.URI},
					schemas.EnvVar{Name: "DLC_CHECKPOINT_KEEP", Value: strconv.Itoa(int(ck.Keep))},
				)
				if ck.Every > 0 {
					env = append(env, schemas.EnvVar{Name: "DLC_CHECKPOINT_EVERY", Value: ck.Every.D().String()})
				}
			}
			for _, d := range spec.Data {
				v := d.URI
				if d.PVC != nil {
					v = d.MountPath
				}
				env = append(env, schemas.EnvVar{Name: "DLC_DATA_" + EnvName(d.Name), Value: v})
				if d.MountPath != "" {
					env = append(env, schemas.EnvVar{Name: "DLC_DATA_" + EnvName(d.Name) + "_PATH", Value: d.MountPath})
				}
			}
			g.Replicas = append(g.Replicas, ReplicaSpec{
				Name:         p.Ref.ReplicaName(role, i),
				Role:         role,
				Index:        i,
				Command:      argv,
				Env:          env,
				WorkingDir:   spec.WorkingDir,
				Resources:    rs.Resources,
				NodeSelector: rs.NodeSelector,
				Tolerations:  rs.Tolerations,
			})
		}
	}
	return g, nil
}

// MergeEnv returns base with overrides applied, keeping base's order and appending new
// names in override order.
func MergeEnv(base, override []schemas.EnvVar) []schemas.EnvVar {
	out := append([]schemas.EnvVar{}, base...)
	for _, o := range override {
		replaced := false
		for i := range out {
			if out[i].Name == o.Name {
				out[i].Value, replaced = o.Value, true
			}
		}
		if !replaced {
			out = append(out, o)
		}
	}
	return out
}

// DataEnvName is the environment variable of data source name: DLC_DATA_<NAME>.
func DataEnvName(name string) string { return "DLC_DATA_" + EnvName(name) }

// EnvName turns s into the upper-case, underscore-separated form used in variable names.
func EnvName(s string) string {
	return strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(s))
}
