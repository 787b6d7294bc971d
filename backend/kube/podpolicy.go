package kube

import (
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// SecurityProfile is how a pool's containers are confined.
type SecurityProfile string

// Security profiles.
const (
	// SecurityImage runs containers as the image's user (root for most training
	// images: NGC PyTorch, DeepSpeed), with the container runtime's defaults: what
	// `docker run` gives. The default.
	SecurityImage SecurityProfile = ""
	// SecurityRestricted applies the restricted Pod Security Standard: non-root user,
	// no privilege escalation, every capability dropped, the runtime's default seccomp
	// profile. An image whose user is root then needs WithRunAsUser.
	SecurityRestricted SecurityProfile = "restricted"
)

// ParseSecurityProfile parses "image" (or "") and "restricted".
func ParseSecurityProfile(s string) (SecurityProfile, error) {
	switch s {
	case "", "image":
		return SecurityImage, nil
	case string(SecurityRestricted):
		return SecurityRestricted, nil
	}
	return "", fmt.Errorf("kube: security profile %q: want image or restricted", s)
}

// PodPolicy is what the pods of a pool may do beyond their own containers, and the
// defaults they get. The zero policy runs images as their own user and allows no host
// networking, no host path and no extended resource but GPUs.
type PodPolicy struct {
	// Security confines the containers. Default SecurityImage.
	Security SecurityProfile
	// AllowHostNetwork lets jobs set spec.pod.hostNetwork.
	AllowHostNetwork bool
	// HostPaths are the node directories (and their subdirectories) that jobs may
	// mount as hostPath volumes.
	HostPaths []string
	// ExtendedResources are the extended resources (rdma/hca, vendor devices) that
	// jobs may request in resources.extended.
	ExtendedResources []string
	// ServiceAccountName is the service account of pods whose job names none; it
	// wins over WithServiceAccount.
	ServiceAccountName string
	// ImagePullSecrets are added to every pod's, after WithImagePullSecrets'.
	ImagePullSecrets []string
}

// DefaultShmSize is the size limit of every replica's /dev/shm unless WithShmSize or
// the job's spec.pod.shmSize says otherwise: enough for NCCL's shared-memory transport
// and multi-worker data loaders, which fail with the runtime's 64Mi.
var DefaultShmSize = resource.MustParse("1Gi")

// shmVolume names the /dev/shm volume.
const shmVolume = "dshm"

// WithShmSize sets the default size limit of every replica's /dev/shm, a memory-backed
// emptyDir; zero mounts none (the runtime's 64Mi). Default: DefaultShmSize.
func WithShmSize(q resource.Quantity) Option {
	return func(b *Backend) error {
		if q.Sign() < 0 {
			return fmt.Errorf("kube: shm size %s: must be >= 0", q.String())
		}
		b.shmSize = q
		return nil
	}
}

// policy returns the policy of pool.
func (b *Backend) policy(pool schemas.Pool) PodPolicy {
	return b.pools[pool].Policy
}

// checkPolicy refuses, naming the field, what the gang asks that its pool's policy
// does not allow.
func (b *Backend) checkPolicy(g backend.GangSpec) error {
	pol := b.policy(g.Pool)
	pool := g.Pool
	if pool == "" {
		pool = schemas.PoolQuota
	}
	if o := g.Pod; o != nil {
		if o.HostNetwork && !pol.AllowHostNetwork {
			return fmt.Errorf("spec.pod.hostNetwork: the policy of pool %s does not allow host networking", pool)
		}
		for i, v := range o.Volumes {
			if v.HostPath != nil && !underAny(v.HostPath.Path, pol.HostPaths) {
				return fmt.Errorf("spec.pod.volumes[%d].hostPath.path: the policy of pool %s does not allow host path %q", i, pool, v.HostPath.Path)
			}
		}
	}
	for _, r := range g.Replicas {
		for _, name := range sortedNames(r.Resources.Extended) {
			if !slices.Contains(pol.ExtendedResources, name) {
				field := schemas.NewPath("spec", "roles").Key(r.Role).Child("resources", "extended").Key(name)
				return fmt.Errorf("%s: the policy of pool %s does not allow this resource", field, pool)
			}
		}
	}
	return nil
}

// underAny reports whether p is one of dirs or below one.
func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		d = path.Clean(d)
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, "/")+"/") {
			return true
		}
	}
	return false
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// securityContexts are the pod's and the container's security contexts under profile.
// securityFor is the profile of a gang's containers: its pool's, tightened to
// SecurityRestricted when its workspace's pod defaults say so.
func (b *Backend) securityFor(g backend.GangSpec) SecurityProfile {
	if g.PodDefaults != nil && g.PodDefaults.Security == schemas.SecurityRestricted {
		return SecurityRestricted
	}
	return b.policy(g.Pool).Security
}

func (b *Backend) securityContexts(profile SecurityProfile) (*corev1.PodSecurityContext, *corev1.SecurityContext) {
	if profile != SecurityRestricted {
		if b.runAsUser == nil {
			return nil, nil
		}
		return &corev1.PodSecurityContext{RunAsUser: b.runAsUser}, nil
	}
	return &corev1.PodSecurityContext{
			RunAsNonRoot:   new(true),
			RunAsUser:      b.runAsUser,
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}, &corev1.SecurityContext{
			AllowPrivilegeEscalation: new(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		}
}

// serviceAccountFor is the pod's service account: the job's, else the workspace's,
// else the pool's, else the backend's; "" for the namespace's default.
func (b *Backend) serviceAccountFor(g backend.GangSpec) string {
	if g.Pod != nil && g.Pod.ServiceAccountName != "" {
		return g.Pod.ServiceAccountName
	}
	if g.PodDefaults != nil && g.PodDefaults.ServiceAccountName != "" {
		return g.PodDefaults.ServiceAccountName
	}
	if sa := b.policy(g.Pool).ServiceAccountName; sa != "" {
		return sa
	}
	return b.serviceAccount
}

// pullSecretsFor are the backend's, the pool's, the workspace's and the job's image
// pull secrets, each once.
func (b *Backend) pullSecretsFor(g backend.GangSpec) []corev1.LocalObjectReference {
	names := slices.Concat(b.pullSecrets, b.policy(g.Pool).ImagePullSecrets)
	if g.PodDefaults != nil {
		names = append(names, g.PodDefaults.ImagePullSecrets...)
	}
	if g.Pod != nil {
		names = append(names, g.Pod.ImagePullSecrets...)
	}
	var out []corev1.LocalObjectReference
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, corev1.LocalObjectReference{Name: n})
		}
	}
	return out
}

// shmSizeFor is the gang's /dev/shm size limit; zero for none.
func (b *Backend) shmSizeFor(g backend.GangSpec) resource.Quantity {
	if g.Pod != nil && g.Pod.ShmSize != nil {
		return g.Pod.ShmSize.DeepCopy()
	}
	return b.shmSize.DeepCopy()
}

// userVolumeName is the pod volume of the job's volume name: prefixed, so it never
// collides with the backend's own volumes.
func userVolumeName(name string) string { return "vol-" + name }

// addPodVolumes adds /dev/shm and the job's volumes to the pod and its container.
func (b *Backend) addPodVolumes(g backend.GangSpec, spec *corev1.PodSpec, c *corev1.Container) {
	if shm := b.shmSizeFor(g); !shm.IsZero() {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &shm},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: shmVolume, MountPath: schemas.ShmMountPath})
	}
	if g.Pod == nil {
		return
	}
	for _, v := range g.Pod.Volumes {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: userVolumeName(v.Name), VolumeSource: volumeSource(v)})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: userVolumeName(v.Name), MountPath: v.MountPath, ReadOnly: v.ReadOnly, SubPath: v.SubPath})
	}
}

// volumeSource is the Kubernetes source of a job's volume.
func volumeSource(v schemas.Volume) corev1.VolumeSource {
	switch {
	case v.EmptyDir != nil:
		src := &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMedium(v.EmptyDir.Medium)}
		if v.EmptyDir.SizeLimit != nil {
			q := v.EmptyDir.SizeLimit.DeepCopy()
			src.SizeLimit = &q
		}
		return corev1.VolumeSource{EmptyDir: src}
	case v.ConfigMap != nil:
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: v.ConfigMap.Name},
			Items:                keysToPaths(v.ConfigMap.Items), DefaultMode: v.ConfigMap.DefaultMode,
		}}
	case v.Secret != nil:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: v.Secret.SecretName, Items: keysToPaths(v.Secret.Items), DefaultMode: v.Secret.DefaultMode,
		}}
	case v.PVC != nil:
		return corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PVC.ClaimName, ReadOnly: v.PVC.ReadOnly}}
	case v.HostPath != nil:
		return corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.HostPath.Path}}
	}
	return corev1.VolumeSource{}
}

// validatePodOptions refuses pod settings that schemas' validation refuses (for gangs
// that did not come through it), and volumes mounted where the backend mounts its own
// (the gang's files and ssh keys: reserved).
func validatePodOptions(g backend.GangSpec, reserved ...string) error {
	if g.Pod == nil {
		return nil
	}
	if errs := schemas.ValidatePodOptions(g.Pod, g.Data); len(errs) > 0 {
		return errs
	}
	for i, v := range g.Pod.Volumes {
		for _, p := range reserved {
			if p != "" && path.Clean(v.MountPath) == path.Clean(p) {
				return fmt.Errorf("spec.pod.volumes[%d].mountPath: %s is where the backend mounts the gang's own files", i, v.MountPath)
			}
		}
	}
	return nil
}

// keysToPaths are a ConfigMap or Secret volume's projected items.
func keysToPaths(items []schemas.KeyToPath) []corev1.KeyToPath {
	var out []corev1.KeyToPath
	for _, it := range items {
		out = append(out, corev1.KeyToPath{Key: it.Key, Path: it.Path, Mode: it.Mode})
	}
	return out
}
