package schemas_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

func TestValidatePodOptions(t *testing.T) {
	q := func(s string) *resource.Quantity { return new(resource.MustParse(s)) }
	pod := func(o schemas.PodOptions) func(*schemas.TrainingJob) {
		return func(j *schemas.TrainingJob) { j.Spec.Pod = &o }
	}
	ext := func(name, v string) func(*schemas.TrainingJob) {
		return func(j *schemas.TrainingJob) {
			for k, r := range j.Spec.Roles {
				r.Resources.Extended = map[string]resource.Quantity{name: resource.MustParse(v)}
				j.Spec.Roles[k] = r
			}
		}
	}
	for name, tc := range map[string]struct {
		mutate func(*schemas.TrainingJob)
		want   []string
	}{
		"every source": {pod(schemas.PodOptions{
			ServiceAccountName: "trainer", ImagePullSecrets: []string{"ngc"}, ShmSize: q("8Gi"), HostNetwork: true,
			Volumes: []schemas.Volume{
				{Name: "a", MountPath: "/a", EmptyDir: &schemas.EmptyDirVolume{Medium: "Memory", SizeLimit: q("1Gi")}},
				{Name: "b", MountPath: "/b", ConfigMap: &schemas.ConfigMapVolume{Name: "cfg"}},
				{Name: "c", MountPath: "/c", Secret: &schemas.SecretVolume{SecretName: "tok"}},
				{Name: "d", MountPath: "/d", PVC: &schemas.PVCSource{ClaimName: "data"}},
				{Name: "e", MountPath: "/e", HostPath: &schemas.HostPathVolume{Path: "/mnt/nvme"}},
			},
		}), []string{}},
		"names": {pod(schemas.PodOptions{ServiceAccountName: "Trainer", ImagePullSecrets: []string{"ok", "no_way"}}),
			[]string{"spec.pod.imagePullSecrets[1]", "spec.pod.serviceAccountName"}},
		"negative shm": {pod(schemas.PodOptions{ShmSize: q("-1Gi")}), []string{"spec.pod.shmSize"}},
		"no source":    {pod(schemas.PodOptions{Volumes: []schemas.Volume{{Name: "a", MountPath: "/a"}}}), []string{"spec.pod.volumes[0]"}},
		"two sources": {pod(schemas.PodOptions{Volumes: []schemas.Volume{{Name: "a", MountPath: "/a",
			EmptyDir: &schemas.EmptyDirVolume{}, Secret: &schemas.SecretVolume{SecretName: "s"}}}}), []string{"spec.pod.volumes[0]"}},
		"bad sources": {pod(schemas.PodOptions{Volumes: []schemas.Volume{
			{Name: "a", MountPath: "/a", EmptyDir: &schemas.EmptyDirVolume{Medium: "HugePages"}},
			{Name: "b", MountPath: "/b", ConfigMap: &schemas.ConfigMapVolume{}},
			{Name: "c", MountPath: "/c", HostPath: &schemas.HostPathVolume{Path: "relative"}},
		}}), []string{"spec.pod.volumes[0].emptyDir.medium", "spec.pod.volumes[1].configMap.name", "spec.pod.volumes[2].hostPath.path"}},
		"mount paths": {func(j *schemas.TrainingJob) {
			j.Spec.Data = []schemas.DataSource{{Name: "d", PVC: &schemas.PVCSource{ClaimName: "c"}, MountPath: "/data"}}
			pod(schemas.PodOptions{Volumes: []schemas.Volume{
				{Name: "a", MountPath: "/data/", EmptyDir: &schemas.EmptyDirVolume{}},
				{Name: "a", MountPath: "/dev/shm", EmptyDir: &schemas.EmptyDirVolume{}},
				{Name: "c", MountPath: "rel", EmptyDir: &schemas.EmptyDirVolume{}},
			}})(j)
		}, []string{"spec.pod.volumes[0].mountPath", "spec.pod.volumes[1].mountPath", "spec.pod.volumes[1].name", "spec.pod.volumes[2].mountPath"}},
		"rdma":             {ext("rdma/hca", "1"), []string{}},
		"unprefixed":       {ext("hca", "1"), []string{"spec.roles.worker.resources.extended.hca"}},
		"gpu":              {ext("nvidia.com/gpu", "1"), []string{"spec.roles.worker.resources.extended[\"nvidia.com/gpu\"]"}},
		"kubernetes.io":    {ext("kubernetes.io/thing", "1"), []string{"spec.roles.worker.resources.extended[\"kubernetes.io/thing\"]"}},
		"fractional":       {ext("rdma/hca", "500m"), []string{"spec.roles.worker.resources.extended[\"rdma/hca\"]"}},
		"zero is no count": {ext("rdma/hca", "0"), []string{"spec.roles.worker.resources.extended[\"rdma/hca\"]"}},
		"past int64":       {ext("rdma/hca", "1e400"), []string{"spec.roles.worker.resources.extended[\"rdma/hca\"]"}},
		"over the bound":   {ext("rdma/hca", "1025"), []string{"spec.roles.worker.resources.extended[\"rdma/hca\"]"}},
		"ssh path":         {pod(schemas.PodOptions{SSHAuthMountPath: "/home/mpiuser/.ssh"}), []string{}},
		"ssh relative":     {pod(schemas.PodOptions{SSHAuthMountPath: "home/.ssh"}), []string{"spec.pod.sshAuthMountPath"}},
		"ssh unclean":      {pod(schemas.PodOptions{SSHAuthMountPath: "/root/.ssh/"}), []string{"spec.pod.sshAuthMountPath"}},
		"ssh at /dev/shm":  {pod(schemas.PodOptions{SSHAuthMountPath: "/dev/shm"}), []string{"spec.pod.sshAuthMountPath"}},
	} {
		t.Run(name, func(t *testing.T) {
			job := schemastest.Job("j").Mutate(tc.mutate).Obj()
			if diff := cmp.Diff(tc.want, job.Validate().Fields()); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// A document with a pod section decodes, and an unknown field of it names its path.
func TestDecodePodOptions(t *testing.T) {
	doc := `
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: ngc}
spec:
  framework: pytorch
  image: nvcr.io/nvidia/pytorch:24.05-py3
  command: [torchrun, train.py]
  roles: {worker: {replicas: 2, resources: {gpu: 8, extended: {rdma/hca: 1}}}}
  pod:
    serviceAccountName: trainer
    imagePullSecrets: [ngc]
    shmSize: 32Gi
    volumes:
    - {name: cfg, mountPath: /etc/train, configMap: {name: train-config}}
`
	job, err := schemas.DecodeTrainingJob([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if o := job.Spec.Pod; o == nil || o.ShmSize.String() != "32Gi" || o.Volumes[0].ConfigMap.Name != "train-config" {
		t.Fatalf("pod options %+v", job.Spec.Pod)
	}
	if q := job.Spec.Roles["worker"].Resources.Extended["rdma/hca"]; q.Value() != 1 {
		t.Errorf("rdma/hca = %s", q.String())
	}
	_, err = schemas.DecodeTrainingJob([]byte(doc + "    hostNetwrk: true\n"))
	var list schemas.ErrorList
	if !errors.As(err, &list) || !cmp.Equal(list.Fields(), []string{"spec.pod.hostNetwrk"}) {
		t.Errorf("misspelt field: %v", err)
	}
}
