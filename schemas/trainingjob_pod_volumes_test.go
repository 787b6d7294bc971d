package schemas_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// ConfigMap and Secret volumes' items and modes, and volumes' subPath: errors name the
// field.
func TestValidateVolumeProjections(t *testing.T) {
	mode := func(m int32) *int32 { return &m }
	vols := func(v ...schemas.Volume) func(*schemas.TrainingJob) {
		return func(j *schemas.TrainingJob) { j.Spec.Pod = &schemas.PodOptions{Volumes: v} }
	}
	for name, tc := range map[string]struct {
		mutate func(*schemas.TrainingJob)
		want   []string
	}{
		"valid": {vols(
			schemas.Volume{Name: "a", MountPath: "/a", ConfigMap: &schemas.ConfigMapVolume{Name: "cfg", DefaultMode: mode(0o644),
				Items: []schemas.KeyToPath{{Key: "train.py", Path: "bin/train.py", Mode: mode(0o755)}, {Key: "ds.json", Path: "ds.json"}}}},
			schemas.Volume{Name: "b", MountPath: "/b/token", SubPath: "token", Secret: &schemas.SecretVolume{SecretName: "tok", DefaultMode: mode(0o400),
				Items: []schemas.KeyToPath{{Key: "token", Path: "token"}}}},
		), []string{}},
		"bad items": {vols(schemas.Volume{Name: "a", MountPath: "/a", Secret: &schemas.SecretVolume{SecretName: "tok", DefaultMode: mode(0o1000),
			Items: []schemas.KeyToPath{
				{Key: "a b", Path: "../escape"},
				{Key: "ok", Path: "/abs", Mode: mode(-1)},
				{Key: "x", Path: "dup"},
				{Key: "y", Path: "./dup"},
				{},
			}}}),
			[]string{
				"spec.pod.volumes[0].secret.defaultMode",
				"spec.pod.volumes[0].secret.items[0].key",
				"spec.pod.volumes[0].secret.items[0].path",
				"spec.pod.volumes[0].secret.items[1].mode",
				"spec.pod.volumes[0].secret.items[1].path",
				"spec.pod.volumes[0].secret.items[3].path",
				"spec.pod.volumes[0].secret.items[4].key",
				"spec.pod.volumes[0].secret.items[4].path",
			}},
		"configMap mode": {vols(schemas.Volume{Name: "a", MountPath: "/a", ConfigMap: &schemas.ConfigMapVolume{Name: "c", DefaultMode: mode(512)}}),
			[]string{"spec.pod.volumes[0].configMap.defaultMode"}},
		"subPath": {vols(
			schemas.Volume{Name: "a", MountPath: "/a", SubPath: "../x", EmptyDir: &schemas.EmptyDirVolume{}},
			schemas.Volume{Name: "b", MountPath: "/b", SubPath: "/abs", EmptyDir: &schemas.EmptyDirVolume{}},
		), []string{"spec.pod.volumes[0].subPath", "spec.pod.volumes[1].subPath"}},
	} {
		t.Run(name, func(t *testing.T) {
			job := schemastest.Job("j").Mutate(tc.mutate).Obj()
			if diff := cmp.Diff(tc.want, job.Validate().Fields()); diff != "" {
				t.Errorf("fields (-want +got):\n%s", diff)
			}
		})
	}
}

// Modes are octal in YAML, as in Kubernetes manifests.
func TestDecodeVolumeModes(t *testing.T) {
	job, err := schemas.DecodeTrainingJob([]byte(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: ngc}
spec:
  framework: pytorch
  image: nvcr.io/nvidia/pytorch:24.05-py3
  command: [torchrun, train.py]
  roles: {worker: {replicas: 1}}
  pod:
    volumes:
    - {name: hf, mountPath: /hf, subPath: hf, secret: {secretName: tok, defaultMode: 0400, items: [{key: token, path: token, mode: 0440}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	v := job.Spec.Pod.Volumes[0]
	if *v.Secret.DefaultMode != 0o400 || *v.Secret.Items[0].Mode != 0o440 || v.SubPath != "hf" {
		t.Errorf("volume %+v, secret %+v", v, *v.Secret)
	}
}

// A workspace's pod defaults: errors name the field under the path given.
func TestValidatePodDefaults(t *testing.T) {
	errs := schemas.ValidatePodDefaults(&schemas.PodDefaults{ServiceAccountName: "Bad", ImagePullSecrets: []string{"ok", "no_way"}},
		schemas.NewPath("podDefaults"))
	if diff := cmp.Diff([]string{"podDefaults.serviceAccountName", "podDefaults.imagePullSecrets[1]"}, errs.Fields()); diff != "" {
		t.Errorf("fields (-want +got):\n%s", diff)
	}
	if errs := schemas.ValidatePodDefaults(&schemas.PodDefaults{ServiceAccountName: "trainer", ImagePullSecrets: []string{"ngc"}}, schemas.NewPath("podDefaults")); len(errs) != 0 {
		t.Errorf("valid defaults: %v", errs)
	}
}
