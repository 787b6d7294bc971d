package schemas

import (
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// ShmMountPath is where a replica's /dev/shm volume is mounted.
const ShmMountPath = "/dev/shm"

// validObjectName reports whether s is a Kubernetes object name (a DNS subdomain).
func validObjectName(s string) bool {
	return s != "" && len(s) <= maxDNSSubdomainLen && dnsSubdomainRE.MatchString(s)
}

// validatePod checks spec.pod: object names, the /dev/shm size, and each volume's one
// source and mount path. Whether the pool allows host networking or a host path is the
// worker's policy, checked when the pods are created.
func validatePod(o *PodOptions, data []DataSource, p Path, errs *ErrorList) {
	if o == nil {
		return
	}
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if o.ServiceAccountName != "" && !validObjectName(o.ServiceAccountName) {
		add(Invalid(p.Child("serviceAccountName"), "must be a ServiceAccount name (a DNS subdomain)"))
	}
	for i, s := range o.ImagePullSecrets {
		if !validObjectName(s) {
			add(Invalid(p.Child("imagePullSecrets").Index(i), "must be a Secret name (a DNS subdomain)"))
		}
	}
	if o.ShmSize != nil && o.ShmSize.Sign() < 0 {
		add(Invalid(p.Child("shmSize"), "must be >= 0 (0 leaves the runtime's default /dev/shm)"))
	}
	if d := o.SSHAuthMountPath; d != "" && (!path.IsAbs(d) || path.Clean(d) != d || d == "/" || d == ShmMountPath) {
		add(Invalid(p.Child("sshAuthMountPath"), "must be a clean absolute path other than / and /dev/shm"))
	}
	// Mount paths may not repeat across volumes and data sources.
	mounts := map[string]string{}
	for i, d := range data {
		if d.PVC != nil && d.MountPath != "" {
			mounts[path.Clean(d.MountPath)] = NewPath("spec", "data").Index(i).Child("mountPath").String()
		}
	}
	names := map[string]int{}
	for i, v := range o.Volumes {
		vp := p.Child("volumes").Index(i)
		// An empty name or mount path is reported as required by the struct tags.
		if j, ok := names[v.Name]; ok && v.Name != "" {
			add(Invalid(vp.Child("name"), "duplicate name %q (first at %s)", v.Name, p.Child("volumes").Index(j)))
		} else if !ok {
			names[v.Name] = i
		}
		validateVolumeMount(v, vp, mounts, errs)
		validateVolumeSource(v, vp, errs)
	}
}

// validateVolumeMount checks a volume's mount path, recording it in mounts.
func validateVolumeMount(v Volume, vp Path, mounts map[string]string, errs *ErrorList) {
	mp := vp.Child("mountPath")
	switch clean := path.Clean(v.MountPath); {
	case v.MountPath == "":
	case !path.IsAbs(v.MountPath):
		*errs = append(*errs, Invalid(mp, "must be an absolute path"))
	case clean == ShmMountPath:
		*errs = append(*errs, Invalid(mp, "/dev/shm is mounted by the backend; set spec.pod.shmSize instead"))
	case mounts[clean] != "":
		*errs = append(*errs, Invalid(mp, "duplicate mount path %q (first at %s)", v.MountPath, mounts[clean]))
	default:
		mounts[clean] = mp.String()
	}
}

// validateVolumeSource checks that exactly one source is set, and that source.
func validateVolumeSource(v Volume, vp Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	var set []string
	if v.EmptyDir != nil {
		set = append(set, "emptyDir")
		if v.EmptyDir.SizeLimit != nil && v.EmptyDir.SizeLimit.Sign() <= 0 {
			add(Invalid(vp.Child("emptyDir", "sizeLimit"), "must be > 0"))
		}
	}
	if v.ConfigMap != nil {
		set = append(set, "configMap")
		if v.ConfigMap.Name != "" && !validObjectName(v.ConfigMap.Name) {
			add(Invalid(vp.Child("configMap", "name"), "must be a ConfigMap name (a DNS subdomain)"))
		}
		validateProjection(v.ConfigMap.Items, v.ConfigMap.DefaultMode, vp.Child("configMap"), errs)
	}
	if v.Secret != nil {
		set = append(set, "secret")
		if v.Secret.SecretName != "" && !validObjectName(v.Secret.SecretName) {
			add(Invalid(vp.Child("secret", "secretName"), "must be a Secret name (a DNS subdomain)"))
		}
		validateProjection(v.Secret.Items, v.Secret.DefaultMode, vp.Child("secret"), errs)
	}
	if v.SubPath != "" && !validRelativePath(v.SubPath) {
		add(Invalid(vp.Child("subPath"), "must be a relative path without '..'"))
	}
	if v.PVC != nil {
		set = append(set, "pvc")
		if v.PVC.ClaimName != "" && !validObjectName(v.PVC.ClaimName) {
			add(Invalid(vp.Child("pvc", "claimName"), "must be a PersistentVolumeClaim name (a DNS subdomain)"))
		}
	}
	if v.HostPath != nil {
		set = append(set, "hostPath")
		if v.HostPath.Path != "" && !path.IsAbs(v.HostPath.Path) || path.Clean(v.HostPath.Path) != v.HostPath.Path {
			add(Invalid(vp.Child("hostPath", "path"), "must be a clean absolute path"))
		}
	}
	switch len(set) {
	case 0:
		add(Invalid(vp, "must set one of emptyDir, configMap, secret, pvc and hostPath"))
	case 1:
	default:
		add(Invalid(vp, "must set only one of emptyDir, configMap, secret, pvc and hostPath, not %s", strings.Join(set, " and ")))
	}
}

// configKeyRE is what a ConfigMap or Secret key may be.
var configKeyRE = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)

// maxFileMode is the largest mode bits a projected file may have (0777).
const maxFileMode = 0o777

// validateProjection checks a ConfigMap or Secret volume's items and default mode
// under p: keys, relative paths used once, and mode bits.
func validateProjection(items []KeyToPath, defaultMode *int32, p Path, errs *ErrorList) {
	add := func(e *FieldError) { *errs = append(*errs, e) }
	if defaultMode != nil && (*defaultMode < 0 || *defaultMode > maxFileMode) {
		add(Invalid(p.Child("defaultMode"), "must be file mode bits between 0 and 0777 (decimal 511)"))
	}
	paths := map[string]int{}
	for i, it := range items {
		ip := p.Child("items").Index(i)
		// An empty key or path is reported as required by the struct tags.
		if it.Key != "" && (len(it.Key) > maxDNSSubdomainLen || !configKeyRE.MatchString(it.Key) || it.Key == "." || it.Key == "..") {
			add(Invalid(ip.Child("key"), "must be a ConfigMap or Secret key: letters, digits, '-', '_' and '.'"))
		}
		switch j, seen := paths[path.Clean(it.Path)]; {
		case it.Path == "":
		case !validRelativePath(it.Path):
			add(Invalid(ip.Child("path"), "must be a relative path without '..'"))
		case seen:
			add(Invalid(ip.Child("path"), "duplicate path %q (first at %s)", it.Path, p.Child("items").Index(j)))
		default:
			paths[path.Clean(it.Path)] = i
		}
		if it.Mode != nil && (*it.Mode < 0 || *it.Mode > maxFileMode) {
			add(Invalid(ip.Child("mode"), "must be file mode bits between 0 and 0777 (decimal 511)"))
		}
	}
}

// validRelativePath reports whether s is a relative path with no ".." element.
func validRelativePath(s string) bool {
	if path.IsAbs(s) {
		return false
	}
	return !slices.Contains(strings.Split(s, "/"), "..")
}

// validateExtended checks a role's extended resources: a domain-prefixed name (GPUs go
// in resources.gpu; cpu and memory have their own fields) and a whole positive number.
func validateExtended(ext map[string]resource.Quantity, p Path, errs *ErrorList) {
	for _, name := range sortedKeys(ext) {
		q, kp := ext[name], p.Key(name)
		prefix, _, hasPrefix := strings.Cut(name, "/")
		switch {
		case validateQualifiedName(name) != "" || !hasPrefix || prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io"):
			*errs = append(*errs, Invalid(kp, "must be an extended resource name: a domain prefix outside kubernetes.io, '/', then a name"))
		case name == "nvidia.com/gpu":
			*errs = append(*errs, Invalid(kp, "use resources.gpu for GPUs"))
		case q.Sign() <= 0 || q.Cmp(MaxExtendedResource) > 0 || q.MilliValue()%1000 != 0:
			*errs = append(*errs, Invalid(kp, "must be a whole number between 1 and %s", MaxExtendedResource.String()))
		}
	}
}

// ValidatePodOptions checks pod options and their mount paths against data's, as
// TrainingJob.Validate does, for callers that hold a spec which may not have come
// through it. Nil when o is fine.
func ValidatePodOptions(o *PodOptions, data []DataSource) ErrorList {
	var errs ErrorList
	validatePod(o, data, NewPath("spec", "pod"), &errs)
	if len(errs) == 0 {
		return nil
	}
	errs.Sort()
	return errs
}

// PodDefaults are a workspace's defaults for its jobs' pods (the workspace registry's
// podDefaults): the kubernetes backend applies them under the job's own spec.pod and
// over the pool's and the worker's.
type PodDefaults struct {
	// ServiceAccountName runs the workspace's pods as this service account of its
	// namespace when the job names none.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// ImagePullSecrets name Secrets of the workspace's namespace holding registry
	// credentials, given to every pod of the workspace after the job's own.
	ImagePullSecrets []string `json:"imagePullSecrets,omitempty"`
	// Security confines the workspace's containers: "restricted" applies the
	// restricted Pod Security Standard (non-root user, no privilege escalation, every
	// capability dropped, RuntimeDefault seccomp) whatever the pool says; "" or "image"
	// leaves it to the pool (by default the image's own user). A workspace can only
	// tighten its pool's policy.
	Security string `json:"security,omitempty" jsonschema:"enum=image,enum=restricted"`
}

// Workspace security profiles (PodDefaults.Security).
const (
	SecurityImage      = "image"
	SecurityRestricted = "restricted"
)

// maxPullSecrets bounds a workspace's image pull secrets, as spec.pod's.
const maxPullSecrets = 16

// ValidatePodDefaults returns every problem with a workspace's pod defaults, each
// naming its field under p.
func ValidatePodDefaults(d *PodDefaults, p Path) ErrorList {
	if d == nil {
		return nil
	}
	var errs ErrorList
	if d.ServiceAccountName != "" && !validObjectName(d.ServiceAccountName) {
		errs = append(errs, Invalid(p.Child("serviceAccountName"), "must be a ServiceAccount name (a DNS subdomain)"))
	}
	if d.Security != "" && d.Security != SecurityImage && d.Security != SecurityRestricted {
		errs = append(errs, NotSupported(p.Child("security"), []string{SecurityImage, SecurityRestricted}))
	}
	if len(d.ImagePullSecrets) > maxPullSecrets {
		errs = append(errs, Invalid(p.Child("imagePullSecrets"), "must have at most %d items", maxPullSecrets))
	}
	for i, s := range d.ImagePullSecrets {
		if !validObjectName(s) {
			errs = append(errs, Invalid(p.Child("imagePullSecrets").Index(i), "must be a Secret name (a DNS subdomain)"))
		}
	}
	return errs
}
