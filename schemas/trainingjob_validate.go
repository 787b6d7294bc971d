package schemas

import (
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultHealthCheckTimeout is the health check timeout Default sets when the check is
// enabled without one.
const DefaultHealthCheckTimeout = Duration(5 * time.Minute)

// Bounds of a TrainingJob that its struct tags cannot express.
const (
	maxRoles = 16
	// maxReplicas matches the maximum of RoleSpec.Replicas' tag.
	maxReplicas = 1024
)

// Upper bounds of what one replica may request. They lie above what any node holds
// (the largest machines Kubernetes runs on have under 2,000 hardware threads and
// 32 TiB of memory), and low enough that a whole job (16 roles of 1,024 replicas)
// counts in an int64 of millicores and of bytes, which is how workspace quotas add
// them up: 16,384 × 64 TiB is 2^60 bytes.
var (
	// MaxReplicaCPU is the most cores one replica may request: 4096.
	MaxReplicaCPU = resource.MustParse("4096")
	// MaxReplicaMemory is the most memory one replica may request: 64Ti.
	MaxReplicaMemory = resource.MustParse("64Ti")
	// MaxExtendedResource is the most of one extended resource a replica may request.
	MaxExtendedResource = resource.MustParse("1024")
)

// roleRule is what a framework allows of one of its roles.
type roleRule struct {
	name string
	// maxReplicas, when not zero, is the most replicas the role may have.
	maxReplicas int32
	// required roles must be present (with exactly maxReplicas replicas when set).
	required bool
	// aliasOf names the role this one is another name for: a job may have one or the
	// other, not both.
	aliasOf string
}

// frameworkRoles lists each framework's roles in the order messages name them. A
// framework that is not listed (custom) accepts any role names. TensorFlow's master is
// the chief under TFJob's older name: a TFJob has at most one Chief or Master.
var frameworkRoles = map[Framework][]roleRule{
	FrameworkPyTorch:    {{name: "master", maxReplicas: 1}, {name: "worker"}},
	FrameworkDeepSpeed:  {{name: "master", maxReplicas: 1}, {name: "worker"}},
	FrameworkMegatron:   {{name: "master", maxReplicas: 1}, {name: "worker"}},
	FrameworkTensorFlow: {{name: "chief", maxReplicas: 1}, {name: "master", maxReplicas: 1, aliasOf: "chief"}, {name: "ps"}, {name: "worker"}, {name: "evaluator", maxReplicas: 1}},
	FrameworkMPI:        {{name: "launcher", maxReplicas: 1, required: true}, {name: "worker"}},
	FrameworkXGBoost:    {{name: "master", maxReplicas: 1}, {name: "worker"}},
	FrameworkPaddle:     {{name: "master"}, {name: "worker"}},
	FrameworkRay:        {{name: "head", maxReplicas: 1, required: true}, {name: "worker"}},
	FrameworkSlurm:      {{name: "launcher", maxReplicas: 1, required: true}, {name: "worker"}},
	FrameworkPreprocess: {{name: "worker"}},
	FrameworkInference:  {{name: "worker"}},
}

// GetKind returns KindTrainingJob.
func (j *TrainingJob) GetKind() Kind { return KindTrainingJob }

// GetMeta returns the job's metadata.
func (j *TrainingJob) GetMeta() *ObjectMeta { return &j.Metadata }

// Default fills in what the user may leave out: the workspace, the pool, log forwarding
// and the health check timeout.
func (j *TrainingJob) Default() {
	if j.Metadata.Workspace == "" {
		j.Metadata.Workspace = DefaultWorkspace
	}
	if j.Spec.Resources.Pool == "" {
		j.Spec.Resources.Pool = PoolQuota
	}
	if j.Spec.Logs.Forward == nil {
		forward := true
		j.Spec.Logs.Forward = &forward
	}
	if j.Spec.HealthCheck.Enabled && j.Spec.HealthCheck.Timeout == 0 {
		j.Spec.HealthCheck.Timeout = DefaultHealthCheckTimeout
	}
}

// Validate returns every problem with the job, sorted by field path, or nil. It does not
// apply defaults, and accepts the empty values that Default would fill in.
func (j *TrainingJob) Validate() ErrorList {
	var errs ErrorList
	validateHeader(j, j.APIVersion, j.Kind, &errs)
	j.Spec.validate(NewPath("spec"), &errs)

	errs.Sort()
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func (s *TrainingJobSpec) validate(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }

	if s.Framework != "" && !slices.Contains(Frameworks, s.Framework) {
		add(NotSupported(p.Child("framework"), Frameworks))
	}
	if len(s.Command) == 0 {
		for _, name := range sortedKeys(s.Roles) {
			if len(s.Roles[name].Command) == 0 {
				add(Invalid(p.Child("command"), "required unless every role sets its own command"))
				break
			}
		}
	}
	if e := s.Elastic; e != nil {
		ep := p.Child("elastic")
		switch {
		case s.Framework != FrameworkPyTorch && s.Framework != FrameworkDeepSpeed && s.Framework != FrameworkMegatron:
			add(Invalid(ep, "is supported by the pytorch, deepspeed and megatron frameworks only"))
		case e.MinReplicas > e.MaxReplicas:
			add(Invalid(ep.Child("minReplicas"), "must be <= maxReplicas"))
		case int(e.MaxReplicas) < s.TotalReplicas() || int(e.MinReplicas) > s.TotalReplicas():
			add(Invalid(ep, "the job's %d replicas must lie between minReplicas and maxReplicas", s.TotalReplicas()))
		}
	}
	validateEnv(s.Env, p.Child("env"), errs)
	for i, name := range s.EnvFromSecrets {
		if len(name) > 253 || !dnsLabelRE.MatchString(strings.ReplaceAll(name, ".", "-")) {
			add(Invalid(p.Child("envFromSecrets").Index(i), "must be a Secret name (a DNS subdomain)"))
		}
	}
	s.validateRoles(p.Child("roles"), errs)

	if s.Resources.Pool != "" && !slices.Contains(Pools, s.Resources.Pool) {
		add(NotSupported(p.Child("resources", "pool"), Pools))
	}
	validateData(s.Data, p.Child("data"), errs)
	validatePod(s.Pod, s.Data, p.Child("pod"), errs)
	s.validateFaultTolerance(p, errs)
	s.validateMetrics(p.Child("metrics"), errs)
	if ck := s.Checkpoint; ck != nil && ck.ResumeFrom != "" && len(ck.ResumeFrom) <= 1100 && !checkpointRefRE.MatchString(ck.ResumeFrom) {
		add(Invalid(p.Child("checkpoint", "resumeFrom"), "must be a checkpoint: s3://bucket/prefix/<step>, the step in digits"))
	}
}

// checkpointRefRE matches a checkpoint ref, s3://bucket/prefix/<step> (see package checkpoint).
var checkpointRefRE = regexp.MustCompile(`^s3://[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]/.+/[0-9]{1,19}/?$`)

func (s *TrainingJobSpec) validateRoles(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	switch {
	case len(s.Roles) == 0:
		add(Invalid(p, "must have at least 1 role"))
	case len(s.Roles) > maxRoles:
		add(Invalid(p, "must have at most %d roles", maxRoles))
	}

	rules, byFramework := frameworkRoles[s.Framework]
	for _, name := range sortedKeys(s.Roles) {
		role, rp := s.Roles[name], p.Key(name)
		if len(name) > maxQualifiedNameLen || !dnsLabelRE.MatchString(name) {
			add(Invalid(rp, "role name must be a DNS label of at most %d characters: lowercase letters, "+
				"digits and '-', starting and ending with a letter or digit", maxQualifiedNameLen))
		}
		if byFramework {
			s.validateFrameworkRole(name, role, rules, rp, errs)
		}
		validateEnv(role.Env, rp.Child("env"), errs)
		validateLabels(role.NodeSelector, rp.Child("nodeSelector"), errs)
		res := rp.Child("resources")
		validateQuantity(role.Resources.CPU, MaxReplicaCPU, "cores", res.Child("cpu"), errs)
		validateQuantity(role.Resources.Memory, MaxReplicaMemory, "bytes", res.Child("memory"), errs)
		validateExtended(role.Resources.Extended, res.Child("extended"), errs)
		for i, t := range role.Tolerations {
			validateToleration(t, rp.Child("tolerations").Index(i), errs)
		}
	}
	if byFramework {
		for _, r := range rules {
			if _, ok := s.Roles[r.name]; r.required && !ok {
				add(Invalid(p.Key(r.name), "required for framework %s, with %d replica", s.Framework, r.maxReplicas))
			}
		}
	}
}

// validateQuantity checks one of a replica's quantities, when set: more than zero and
// at most limit (unit names what it counts, for the message).
func validateQuantity(q *resource.Quantity, limit resource.Quantity, unit string, p Path, errs *ErrorList) {
	switch {
	case q == nil:
	case q.Sign() <= 0:
		*errs = append(*errs, Invalid(p, "must be > 0"))
	case q.Cmp(limit) > 0:
		*errs = append(*errs, Invalid(p, "must be at most %s (%s): more than any node holds", limit.String(), unit))
	}
}

// validateFrameworkRole checks a role against what its framework allows.
func (s *TrainingJobSpec) validateFrameworkRole(name string, role RoleSpec, rules []roleRule, p Path, errs *ErrorList) {
	names := make([]string, len(rules))
	var rule *roleRule
	for i := range rules {
		names[i] = rules[i].name
		if rules[i].name == name {
			rule = &rules[i]
		}
	}
	if rule == nil {
		*errs = append(*errs, Invalid(p, "not a role of framework %s; must be one of %s",
			s.Framework, strings.Join(names, ", ")))
		return
	}
	if _, both := s.Roles[rule.aliasOf]; both {
		*errs = append(*errs, Invalid(p, "is another name for role %s of framework %s: set one of them, not both", rule.aliasOf, s.Framework))
	}
	if rule.maxReplicas == 0 || role.Replicas < 1 || role.Replicas > maxReplicas {
		return // the general bounds have already been reported
	}
	switch {
	case rule.required && role.Replicas != rule.maxReplicas:
		*errs = append(*errs, Invalid(p.Child("replicas"), "must be %d for framework %s", rule.maxReplicas, s.Framework))
	case role.Replicas > rule.maxReplicas:
		*errs = append(*errs, Invalid(p.Child("replicas"), "must be <= %d for framework %s", rule.maxReplicas, s.Framework))
	}
}

func validateToleration(t Toleration, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if t.Key != "" {
		if msg := validateQualifiedName(t.Key); msg != "" {
			add(Invalid(p.Child("key"), "%s", strings.TrimPrefix(msg, "key ")))
		}
	} else if t.Operator != "Exists" {
		add(Invalid(p.Child("operator"), "must be Exists when key is empty"))
	}
	if t.Operator == "Exists" && t.Value != "" {
		add(Invalid(p.Child("value"), "must be empty when operator is Exists"))
	} else if msg := validateLabelValue(t.Value); msg != "" {
		add(Invalid(p.Child("value"), "%s", strings.TrimPrefix(msg, "value ")))
	}
}

func validateData(data []DataSource, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	names, mounts := map[string]int{}, map[string]int{}
	for i, d := range data {
		dp := p.Index(i)
		if d.Name != "" {
			if j, ok := names[d.Name]; ok {
				add(Invalid(dp.Child("name"), "duplicate name %q (first at %s)", d.Name, p.Index(j)))
			} else {
				names[d.Name] = i
			}
		}
		switch {
		case d.URI == "" && d.PVC == nil:
			add(Invalid(dp.Child("uri"), "required unless pvc is set"))
		case d.URI != "" && d.PVC != nil:
			add(Invalid(dp.Child("pvc"), "must not be set with uri"))
		case d.PVC != nil:
			if d.PVC.ClaimName == "" || !dnsLabelRE.MatchString(strings.ReplaceAll(d.PVC.ClaimName, ".", "-")) {
				add(Invalid(dp.Child("pvc", "claimName"), "must be a PersistentVolumeClaim name"))
			}
			if d.MountPath == "" {
				add(Invalid(dp.Child("mountPath"), "required for a pvc"))
			}
		case d.URI == "":
		case strings.HasPrefix(d.URI, "s3://"):
			if msg := validateS3URI(d.URI); msg != "" {
				add(Invalid(dp.Child("uri"), "%s", msg))
			}
		case schemeRE.MatchString(d.URI) && strings.Contains(d.URI, "://"):
			add(Invalid(dp.Child("uri"), "must be s3://bucket/prefix or a local path"))
		}
		if d.SecretRef != "" {
			if !strings.HasPrefix(d.URI, "s3://") {
				add(Invalid(dp.Child("secretRef"), "applies to s3:// URIs only"))
			} else if len(d.SecretRef) > 253 || !dnsLabelRE.MatchString(strings.ReplaceAll(d.SecretRef, ".", "-")) {
				add(Invalid(dp.Child("secretRef"), "must be a Secret name (a DNS subdomain)"))
			}
		}
		if d.MountPath != "" {
			mp := path.Clean(d.MountPath)
			if !path.IsAbs(d.MountPath) {
				add(Invalid(dp.Child("mountPath"), "must be an absolute path"))
			} else if j, ok := mounts[mp]; ok {
				add(Invalid(dp.Child("mountPath"), "duplicate mount path %q (first at %s)", d.MountPath, p.Index(j)))
			} else {
				mounts[mp] = i
			}
		}
	}
}

// validateFaultTolerance checks the failure rules, the hang timeout and the spot
// fallback.
func (s *TrainingJobSpec) validateFaultTolerance(p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	ft := p.Child("faultTolerance")
	if h := s.FaultTolerance.HangTimeout.D(); h != 0 {
		switch {
		case h < 0: // reported with the other negative durations
		case h < time.Second:
			add(Invalid(ft.Child("hangTimeout"), "must be at least 1s"))
		case !s.Logs.ForwardLogs():
			add(Invalid(ft.Child("hangTimeout"), "needs log forwarding: hangs are seen in the replicas' output (logs.forward is false)"))
		}
	}
	for i, r := range s.FaultTolerance.Rules {
		rp := ft.Child("rules").Index(i)
		if r.Action != ActionRetry && r.Action != ActionFail {
			add(NotSupported(rp.Child("action"), []FailureAction{ActionRetry, ActionFail}))
		}
		if len(r.ExitCodes) == 0 && r.LogPattern == "" {
			add(Invalid(rp, "needs exitCodes or logPattern"))
		}
		for j, c := range r.ExitCodes {
			if c < 0 || c > 255 {
				add(Invalid(rp.Child("exitCodes").Index(j), "must be between 0 and 255"))
			}
		}
		if r.LogPattern != "" {
			if _, err := regexp.Compile(r.LogPattern); err != nil {
				add(Invalid(rp.Child("logPattern"), "must be a regular expression: %v", err))
			}
		}
	}
	if sf := s.Resources.SpotFallback; sf != nil && s.Resources.Pool != PoolSpot {
		add(Invalid(p.Child("resources", "spotFallback"), "applies to the spot pool only"))
	}
}
