package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/api"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/schemas"
)

// An MPI job on a real API server, with the worker under deploy/rbac.yaml's role, gets
// what an MPIJob gets: the hostfile and discover_hosts.sh in a ConfigMap mounted at
// /etc/mpi, OMPI_MCA_orte_default_hostfile pointing there, and one ssh key pair per
// gang in a kubernetes.io/ssh-auth Secret mounted in every pod as id_rsa, id_rsa.pub
// and authorized_keys. Both are owned by the gang's Service, so when the job ends and
// its Service is deleted the garbage collector deletes them too.
func TestMPIHostfileAndSSHSecretOnKubernetes(t *testing.T) {
	ctx := testContext(t)
	const ns, name = "kube-mpi", "allreduce"
	submit(t, ctx, `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: allreduce, workspace: kube-mpi}
spec:
  framework: mpi
  image: registry.local/horovod:0.28
  command: [mpirun, python, train.py]
  logs: {forward: false}
  roles:
    launcher: {replicas: 1}
    worker: {replicas: 2, resources: {gpu: 2}, command: [/usr/sbin/sshd, -De]}
`)
	j := waitJob(t, ctx, ns, name, "Running", func(j *api.Job) bool {
		return j.Status.Phase == schemas.JobRunning || j.Status.Phase.Terminal()
	})
	if j.Status.Phase != schemas.JobRunning {
		t.Fatalf("phase %s (%s), want Running", j.Status.Phase, j.Status.Message)
	}
	cs := env.cluster.Client
	svc, err := cs.CoreV1().Services(ns).Get(ctx, "allreduce-a0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	w0, w1 := "worker-0.allreduce-a0.kube-mpi.svc", "worker-1.allreduce-a0.kube-mpi.svc"
	hostfile := w0 + " slots=2\n" + w1 + " slots=2\n"
	cm, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "allreduce-a0-files", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("configmap: %v", err)
	}
	wantData := map[string]string{
		"hostfile":          hostfile,
		"discover_hosts.sh": "#!/bin/sh\necho " + w0 + ":2\necho " + w1 + ":2\n",
	}
	if diff := cmp.Diff(wantData, cm.Data); diff != "" {
		t.Errorf("configmap data (-want +got):\n%s", diff)
	}
	sec, err := cs.CoreV1().Secrets(ns).Get(ctx, "allreduce-a0-ssh", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("secret: %v", err)
	}
	if sec.Type != corev1.SecretTypeSSHAuth {
		t.Errorf("secret type %q, want %q", sec.Type, corev1.SecretTypeSSHAuth)
	}
	signer, err := ssh.ParsePrivateKey(sec.Data["ssh-privatekey"])
	if err != nil {
		t.Fatalf("ssh-privatekey: %v", err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(sec.Data["ssh-publickey"])
	if err != nil {
		t.Fatalf("ssh-publickey: %v", err)
	}
	if string(pub.Marshal()) != string(signer.PublicKey().Marshal()) {
		t.Error("ssh-publickey is not ssh-privatekey's public key")
	}
	for _, o := range []metav1.Object{cm, sec} {
		refs := o.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != svc.UID || refs[0].Kind != "Service" {
			t.Errorf("%s owners %+v, want the gang's service", o.GetName(), refs)
		}
	}

	pods := jobPods(t, ctx, ns, name)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	for _, p := range pods {
		mounts := map[string]string{}
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		sources := map[string]string{}
		for _, v := range p.Spec.Volumes {
			switch {
			case v.ConfigMap != nil:
				sources[v.Name] = "configmap/" + v.ConfigMap.Name
			case v.Secret != nil:
				sources[v.Name] = "secret/" + v.Secret.SecretName
				var paths []string
				for _, it := range v.Secret.Items {
					paths = append(paths, it.Key+"="+it.Path)
				}
				if diff := cmp.Diff([]string{"ssh-privatekey=id_rsa", "ssh-publickey=id_rsa.pub", "ssh-publickey=authorized_keys"}, paths); diff != "" {
					t.Errorf("pod %s ssh items (-want +got):\n%s", p.Name, diff)
				}
			}
		}
		if diff := cmp.Diff(map[string]string{"mpi-job-config": "/etc/mpi", "ssh-auth": "/root/.ssh", "dshm": "/dev/shm"}, mounts); diff != "" {
			t.Errorf("pod %s mounts (-want +got):\n%s", p.Name, diff)
		}
		if diff := cmp.Diff(map[string]string{"mpi-job-config": "configmap/allreduce-a0-files", "ssh-auth": "secret/allreduce-a0-ssh"}, sources); diff != "" {
			t.Errorf("pod %s volumes (-want +got):\n%s", p.Name, diff)
		}
		e := envOf(p.Spec.Containers[0])
		wantEnv := map[string]string{
			"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "DLC_HOSTFILE_CONTENT": hostfile,
			"OMPI_MCA_orte_keep_fqdn_hostnames": "true", "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
			"OMPI_MCA_orte_set_default_slots": "2", "DLC_MPI_NP": "4", "K_MPI_JOB_ROLE": p.Labels["opendlc.io/role"],
			"PYTHONUNBUFFERED": "1", "NPROC_PER_NODE": "2",
		}
		if p.Labels["opendlc.io/role"] == "launcher" {
			wantEnv["NPROC_PER_NODE"] = "1"
		}
		for k, v := range wantEnv {
			if e[k] != v {
				t.Errorf("pod %s %s=%q, want %q", p.Name, k, e[k], v)
			}
		}
	}

	// The launcher decides: completing it ends the job, whose Service is deleted; the
	// garbage collector then deletes the ConfigMap and the Secret with it.
	completePod(t, ctx, ns, "allreduce-launcher-0-a0")
	j = waitJob(t, ctx, ns, name, "terminal", terminal)
	if j.Status.Phase != schemas.JobSucceeded {
		t.Fatalf("phase %s (%s), want Succeeded", j.Status.Phase, j.Status.Message)
	}
	testutil.Eventually(t, itest.Left(ctx), "the configmap and the secret deleted with the service", func() bool {
		_, errSvc := cs.CoreV1().Services(ns).Get(ctx, "allreduce-a0", metav1.GetOptions{})
		_, errCM := cs.CoreV1().ConfigMaps(ns).Get(ctx, "allreduce-a0-files", metav1.GetOptions{})
		_, errSec := cs.CoreV1().Secrets(ns).Get(ctx, "allreduce-a0-ssh", metav1.GetOptions{})
		return apierrors.IsNotFound(errSvc) && apierrors.IsNotFound(errCM) && apierrors.IsNotFound(errSec)
	}, itest.PollInterval)
}
