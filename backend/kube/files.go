package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/frameworks"
)

// Names of the volumes that carry a gang's framework files and ssh key pair. The same
// as mpi-operator's, so a pod reads like an MPIJob's.
const (
	filesVolume = "mpi-job-config"
	sshVolume   = "ssh-auth"
)

// DefaultSSHAuthMountPath is where the gang's ssh key pair is mounted unless the job
// (spec.pod.sshAuthMountPath) or the worker (WithSSHAuthMountPath) says otherwise:
// root's home, mpi-operator's default sshAuthMountPath, since pods run as the image's
// user, root in most training images. A non-root image (mpi-operator's own mpiuser
// images, a pool under the restricted policy) wants its user's, e.g. /home/mpiuser/.ssh
// as mpi-operator's examples set it.
const DefaultSSHAuthMountPath = rootSSHPath

// rootSSHPath is root's .ssh directory, where the key pair's files get mode 0600, as
// mpi-operator sets them there.
const rootSSHPath = "/root/.ssh"

// Keys of the gang's ssh Secret, of type kubernetes.io/ssh-auth, and the files they
// become, as mpi-operator v2 names them. The public key is also authorized_keys, so
// every replica accepts the launcher.
const (
	sshPublicKey          = "ssh-publickey"
	sshPrivateKeyFile     = "id_rsa"
	sshPublicKeyFile      = "id_rsa.pub"
	sshAuthorizedKeysFile = "authorized_keys"
)

// gangMounts are what a gang's pods mount besides data: the framework's files, its ssh
// key pair.
type gangMounts struct {
	filesDir string
	files    []frameworks.File
	ssh      bool
}

// sshPathFor is where gang g's pods find its ssh key pair: the job's
// spec.pod.sshAuthMountPath, else the worker's.
func (b *Backend) sshPathFor(g backend.GangSpec) string {
	if g.Pod != nil && g.Pod.SSHAuthMountPath != "" {
		return g.Pod.SSHAuthMountPath
	}
	return b.sshPath
}

// filesName is the ConfigMap of a gang's framework files: <service>-files.
func filesName(svc string) string { return svc + "-files" }

// sshName is the Secret of a gang's ssh key pair: <service>-ssh, as mpi-operator's
// <job>-ssh.
func sshName(svc string) string { return svc + "-ssh" }

// ownedBy makes the Service the controller owner of an object of its gang, so deleting
// the Service (Cleanup) deletes it.
func ownedBy(svc *corev1.Service) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion:         "v1",
		Kind:               "Service",
		Name:               svc.Name,
		UID:                svc.UID,
		Controller:         new(true),
		BlockOwnerDeletion: new(true),
	}}
}

// ensureGangObjects creates the gang's ConfigMap of framework files and its ssh
// Secret, where it has them. Both are created, never read: an existing one is this
// gang's (its name derives from the gang's Service's, which ensureService checked),
// and the worker needs no permission to read Secrets.
func (b *Backend) ensureGangObjects(ctx context.Context, g backend.GangSpec, svc *corev1.Service, m gangMounts) error {
	if len(m.files) > 0 {
		cm := filesConfigMap(g, svc, m.files)
		_, err := b.client.CoreV1().ConfigMaps(svc.Namespace).Create(ctx, cm, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kube: create configmap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
	}
	if m.ssh {
		s, err := sshSecret(g, svc)
		if err != nil {
			return err
		}
		_, err = b.client.CoreV1().Secrets(svc.Namespace).Create(ctx, s, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			// The error names the Secret, never its data.
			return fmt.Errorf("kube: create secret %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// filesConfigMap is the ConfigMap of the gang's framework files.
func filesConfigMap(g backend.GangSpec, svc *corev1.Service, files []frameworks.File) *corev1.ConfigMap {
	data := make(map[string]string, len(files))
	for _, f := range files {
		data[f.Name] = f.Content
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: filesName(svc.Name), Namespace: svc.Namespace, Labels: gangLabels(g), OwnerReferences: ownedBy(svc),
		},
		Data: data,
	}
}

// sshSecret is a new ssh key pair for the gang, as mpi-operator v2 makes one: an ECDSA
// P-521 key, the private key PEM-encoded (SEC 1), the public key in authorized_keys
// form. Immutable: the pods of one gang must all hold the same pair.
func sshSecret(g backend.GangSpec, svc *corev1.Service) (*corev1.Secret, error) {
	key, err := ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("kube: ssh key: %w", err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("kube: ssh key: %w", err)
	}
	pub, err := ssh.NewPublicKey(&key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("kube: ssh key: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: sshName(svc.Name), Namespace: svc.Namespace, Labels: gangLabels(g), OwnerReferences: ownedBy(svc),
		},
		Type:      corev1.SecretTypeSSHAuth,
		Immutable: new(true),
		Data: map[string][]byte{
			corev1.SSHAuthPrivateKey: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}),
			sshPublicKey:             ssh.MarshalAuthorizedKey(pub),
		},
	}, nil
}

// mountGangObjects adds the gang's ConfigMap and ssh Secret to a pod: the files at
// their directory, read-only, each with its mode; the key pair at sshPath as
// id_rsa, id_rsa.pub and authorized_keys (mode 0600 under /root/.ssh, where ssh and
// sshd run as the files' owner, the default 0644 elsewhere, as mpi-operator does).
func mountGangObjects(spec *corev1.PodSpec, c *corev1.Container, svc string, m gangMounts, sshPath string) {
	if len(m.files) > 0 {
		items := make([]corev1.KeyToPath, len(m.files))
		for i, f := range m.files {
			items[i] = corev1.KeyToPath{Key: f.Name, Path: f.Name, Mode: new(int32(f.Mode.Perm()))}
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: filesVolume, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: filesName(svc)}, Items: items},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: filesVolume, MountPath: m.filesDir, ReadOnly: true})
	}
	if m.ssh {
		var mode *int32
		if sshPath == rootSSHPath {
			mode = new(int32(0o600))
		}
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: sshName(svc), DefaultMode: mode, Items: []corev1.KeyToPath{
				{Key: corev1.SSHAuthPrivateKey, Path: sshPrivateKeyFile},
				{Key: sshPublicKey, Path: sshPublicKeyFile},
				{Key: sshPublicKey, Path: sshAuthorizedKeysFile},
			}},
		}})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: sshVolume, MountPath: sshPath, ReadOnly: true})
	}
}
