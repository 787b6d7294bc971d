package kube

import (
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// mpiJob is an MPI job: a launcher and two workers with 4 GPUs each.
func mpiJob(name string) *schemastest.JobBuilder {
	return schemastest.Job(name).Workspace("vision").Framework(schemas.FrameworkMPI).
		Role("launcher", 1).CPU("2").
		Role("worker", 2).GPUs(4)
}

// An MPI gang gets, as an MPIJob does, a ConfigMap with the hostfile and
// discover_hosts.sh mounted at /etc/mpi and an ssh key pair Secret mounted as
// id_rsa, id_rsa.pub and authorized_keys, both owned by the gang's Service; the
// variables point at the mounted hostfile.
func TestLaunchMPIFilesAndSSH(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	g := gangOf(t, mpiJob("allreduce"))
	launch(t, b, g)
	ctx := context.Background()

	svc, err := cs.CoreV1().Services("vision").Get(ctx, "allreduce-a1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: svc.Name, UID: svc.UID, Controller: new(true), BlockOwnerDeletion: new(true)}}

	cm, err := cs.CoreV1().ConfigMaps("vision").Get(ctx, "allreduce-a1-files", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("configmap: %v", err)
	}
	w0, w1 := "worker-0.allreduce-a1.vision.svc", "worker-1.allreduce-a1.vision.svc"
	wantData := map[string]string{
		"hostfile":          w0 + " slots=4\n" + w1 + " slots=4\n",
		"discover_hosts.sh": "#!/bin/sh\necho " + w0 + ":4\necho " + w1 + ":4\n",
	}
	if diff := cmp.Diff(wantData, cm.Data); diff != "" {
		t.Errorf("configmap data (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(owner, cm.OwnerReferences); diff != "" {
		t.Errorf("configmap owner (-want +got):\n%s", diff)
	}
	if cm.Labels[LabelGang] != "vision.allreduce.a1" {
		t.Errorf("configmap labels = %v", cm.Labels)
	}

	sec, err := cs.CoreV1().Secrets("vision").Get(ctx, "allreduce-a1-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("secret: %v", err)
	}
	if sec.Type != corev1.SecretTypeSSHAuth || sec.Immutable == nil || !*sec.Immutable {
		t.Errorf("secret type %q immutable %v, want kubernetes.io/ssh-auth and immutable", sec.Type, sec.Immutable)
	}
	if diff := cmp.Diff(owner, sec.OwnerReferences); diff != "" {
		t.Errorf("secret owner (-want +got):\n%s", diff)
	}
	checkKeyPair(t, sec.Data["ssh-privatekey"], sec.Data["ssh-publickey"])

	wantVolumes := []corev1.Volume{
		{Name: "mpi-job-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "allreduce-a1-files"},
			Items: []corev1.KeyToPath{
				{Key: "hostfile", Path: "hostfile", Mode: new(int32(0o444))},
				{Key: "discover_hosts.sh", Path: "discover_hosts.sh", Mode: new(int32(0o555))},
			},
		}}},
		// Root's home, mpi-operator's default, with mode 0600 as mpi-operator sets it there.
		{Name: "ssh-auth", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName:  "allreduce-a1-ssh",
			DefaultMode: new(int32(0o600)),
			Items: []corev1.KeyToPath{
				{Key: "ssh-privatekey", Path: "id_rsa"},
				{Key: "ssh-publickey", Path: "id_rsa.pub"},
				{Key: "ssh-publickey", Path: "authorized_keys"},
			},
		}}},
		{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			Medium: corev1.StorageMediumMemory, SizeLimit: new(resource.MustParse("1Gi")),
		}}},
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "mpi-job-config", MountPath: "/etc/mpi", ReadOnly: true},
		{Name: "ssh-auth", MountPath: "/root/.ssh", ReadOnly: true},
		{Name: "dshm", MountPath: "/dev/shm"},
	}
	ps := pods(t, cs, "vision")
	if len(ps) != 3 {
		t.Fatalf("%d pods, want 3", len(ps))
	}
	for name, p := range ps {
		if diff := cmp.Diff(wantVolumes, p.Spec.Volumes); diff != "" {
			t.Errorf("%s volumes (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantMounts, p.Spec.Containers[0].VolumeMounts); diff != "" {
			t.Errorf("%s mounts (-want +got):\n%s", name, diff)
		}
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["OMPI_MCA_orte_default_hostfile"] != "/etc/mpi/hostfile" || env["DLC_HOSTFILE_CONTENT"] != wantData["hostfile"] {
			t.Errorf("%s: OMPI_MCA_orte_default_hostfile %q, DLC_HOSTFILE_CONTENT %q", name, env["OMPI_MCA_orte_default_hostfile"], env["DLC_HOSTFILE_CONTENT"])
		}
	}

	// A second Launch (a retried activity, another worker) keeps the gang's key pair.
	launch(t, b, g)
	again, err := cs.CoreV1().Secrets("vision").Get(ctx, "allreduce-a1-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(again.Data["ssh-privatekey"]) != string(sec.Data["ssh-privatekey"]) {
		t.Error("a repeated Launch replaced the gang's key pair")
	}
}

// A DeepSpeed gang's hostfile is a file at /job/hostfile in every pod, where the
// deepspeed launcher reads it by default (DLTS_HOSTFILE): a ConfigMap owned by the
// Service, mounted read-only; DLC_HOSTFILE names it. No ssh key pair: the replicas
// start their own processes (deepspeed --no_ssh, torchrun).
func TestLaunchDeepSpeedHostfile(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	launch(t, b, gangOf(t, schemastest.Job("zero3").Workspace("vision").Framework(schemas.FrameworkDeepSpeed).
		Role("master", 1).GPUs(8).Role("worker", 1).GPUs(8)))
	ctx := context.Background()

	cm, err := cs.CoreV1().ConfigMaps("vision").Get(ctx, "zero3-a1-files", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("configmap: %v", err)
	}
	const hostfile = "master-0.zero3-a1.vision.svc slots=8\nworker-0.zero3-a1.vision.svc slots=8\n"
	if diff := cmp.Diff(map[string]string{"hostfile": hostfile}, cm.Data); diff != "" {
		t.Errorf("configmap data (-want +got):\n%s", diff)
	}
	if len(cm.OwnerReferences) != 1 || cm.OwnerReferences[0].Kind != "Service" || cm.OwnerReferences[0].Name != "zero3-a1" {
		t.Errorf("configmap owners = %v, want the gang's Service", cm.OwnerReferences)
	}
	if l, _ := cs.CoreV1().Secrets("vision").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("secrets: %d, want none", len(l.Items))
	}
	wantVolume := corev1.Volume{Name: "mpi-job-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "zero3-a1-files"},
		Items:                []corev1.KeyToPath{{Key: "hostfile", Path: "hostfile", Mode: new(int32(0o444))}},
	}}}
	wantMount := corev1.VolumeMount{Name: "mpi-job-config", MountPath: "/job", ReadOnly: true}
	ps := pods(t, cs, "vision")
	if len(ps) != 2 {
		t.Fatalf("%d pods, want 2", len(ps))
	}
	for name, p := range ps {
		if diff := cmp.Diff(wantVolume, p.Spec.Volumes[0]); diff != "" {
			t.Errorf("%s volume (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantMount, p.Spec.Containers[0].VolumeMounts[0]); diff != "" {
			t.Errorf("%s mount (-want +got):\n%s", name, diff)
		}
		env := map[string]string{}
		for _, e := range p.Spec.Containers[0].Env {
			env[e.Name] = e.Value
		}
		if env["DLC_HOSTFILE"] != "/job/hostfile" || env["DLC_HOSTFILE_CONTENT"] != hostfile {
			t.Errorf("%s: DLC_HOSTFILE %q, DLC_HOSTFILE_CONTENT %q", name, env["DLC_HOSTFILE"], env["DLC_HOSTFILE_CONTENT"])
		}
	}
}

// checkKeyPair checks that priv is a PEM EC private key whose public half is pub, in
// authorized_keys form.
func checkKeyPair(t *testing.T, priv, pub []byte) {
	t.Helper()
	block, _ := pem.Decode(priv)
	if block == nil || block.Type != "EC PRIVATE KEY" {
		t.Fatalf("private key is not a PEM EC private key")
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("private key: %v", err)
	}
	signer, err := ssh.ParsePrivateKey(priv)
	if err != nil {
		t.Fatalf("ssh cannot read the private key: %v", err)
	}
	authorized, _, _, rest, err := ssh.ParseAuthorizedKey(pub)
	if err != nil || len(rest) != 0 {
		t.Fatalf("public key is not one authorized_keys line: %v", err)
	}
	if !strings.HasPrefix(string(pub), "ecdsa-sha2-nistp521 ") {
		t.Errorf("public key type: %.30s", pub)
	}
	if string(authorized.Marshal()) != string(signer.PublicKey().Marshal()) {
		t.Error("the public key is not the private key's")
	}
	if _, ok := key.Public().(*ecdsa.PublicKey); !ok {
		t.Error("not an ECDSA key")
	}
}

// Only frameworks that need them get files or a key pair: a PyTorch gang's pods mount
// nothing of the sort, and no ConfigMap or Secret is created.
func TestLaunchWithoutFrameworkFiles(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs)
	launch(t, b, gangOf(t, ddp("resnet")))
	ctx := context.Background()
	if l, _ := cs.CoreV1().ConfigMaps("vision").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("configmaps: %d, want none", len(l.Items))
	}
	if l, _ := cs.CoreV1().Secrets("vision").List(ctx, metav1.ListOptions{}); len(l.Items) != 0 {
		t.Errorf("secrets: %d, want none", len(l.Items))
	}
	for name, p := range pods(t, cs, "vision") {
		for _, v := range p.Spec.Volumes {
			if v.Name == "mpi-job-config" || v.Name == "ssh-auth" {
				t.Errorf("%s mounts %s", name, v.Name)
			}
		}
	}
}

// The key pair is mounted where mpi-operator's sshAuthMountPath says: /root/.ssh by
// default (mode 0600), the worker's WithSSHAuthMountPath else, and a job's
// spec.pod.sshAuthMountPath over both; elsewhere than /root/.ssh the files keep the
// Secret volume's default mode, as mpi-operator leaves them. A volume of the job's at
// that path is refused, and a relative worker path too.
func TestSSHAuthMountPath(t *testing.T) {
	sshMount := func(p *corev1.Pod) (string, *int32) {
		var mount string
		var mode *int32
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			if m.Name == "ssh-auth" {
				mount = m.MountPath
			}
		}
		for _, v := range p.Spec.Volumes {
			if v.Name == "ssh-auth" {
				mode = v.Secret.DefaultMode
			}
		}
		return mount, mode
	}
	nonRoot := func(j *schemas.TrainingJob) {
		j.Spec.Pod = &schemas.PodOptions{SSHAuthMountPath: "/home/mpiuser/.ssh"}
	}
	for name, tc := range map[string]struct {
		opts      []Option
		job       *schemastest.JobBuilder
		wantMount string
		wantMode  *int32
	}{
		"default is root's":          {job: mpiJob("root"), wantMount: "/root/.ssh", wantMode: new(int32(0o600))},
		"the worker's":               {opts: []Option{WithSSHAuthMountPath("/home/mpi/.ssh")}, job: mpiJob("worker"), wantMount: "/home/mpi/.ssh"},
		"the job's over the default": {job: mpiJob("job").Mutate(nonRoot), wantMount: "/home/mpiuser/.ssh"},
		"the job's over the worker's": {
			opts: []Option{WithSSHAuthMountPath("/home/mpi/.ssh")}, job: mpiJob("both").Mutate(nonRoot), wantMount: "/home/mpiuser/.ssh",
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := newClient()
			launch(t, newBackend(t, cs, tc.opts...), gangOf(t, tc.job))
			for pod, p := range pods(t, cs, "vision") {
				mount, mode := sshMount(p)
				if mount != tc.wantMount || !cmp.Equal(mode, tc.wantMode) {
					t.Errorf("%s: ssh mounted at %q with mode %v, want %q and %v", pod, mount, mode, tc.wantMount, tc.wantMode)
				}
			}
		})
	}

	cs := newClient()
	g := gangOf(t, mpiJob("clash").Mutate(func(j *schemas.TrainingJob) {
		j.Spec.Pod = &schemas.PodOptions{SSHAuthMountPath: "/home/mpiuser/.ssh", Volumes: []schemas.Volume{
			{Name: "keys", MountPath: "/home/mpiuser/.ssh", EmptyDir: &schemas.EmptyDirVolume{}},
		}}
	}))
	if err := newBackend(t, cs).Launch(context.Background(), g); !errors.Is(err, backend.ErrInvalidSpec) {
		t.Errorf("Launch with a volume at the ssh mount path: %v, want an invalid spec", err)
	}
	if _, err := New(cs, WithSSHAuthMountPath("home/.ssh")); err == nil {
		t.Error("New accepted a relative ssh mount path")
	}
}
