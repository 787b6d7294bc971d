package kube

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

var testS3 = S3Credentials{
	Endpoint: "http://s3.storage.svc:9000", Region: "eu-west-1",
	AccessKeyID: "AKIAVISION", SecretAccessKey: "vision-secret-key",
}

// secretRef is the variable name taken from key of the S3 Secret.
func secretRef(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: S3SecretName}, Key: name,
	}}}
}

// envOf is a container's environment by name.
func envOf(c corev1.Container) map[string]corev1.EnvVar {
	out := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		out[e.Name] = e
	}
	return out
}

// Every pod takes the S3 variables from the workspace's Secret, which holds the
// credentials the function gave for that workspace; no credential is in a pod spec, and
// the worker's plain S3 defaults (WithEnv) are replaced, not duplicated.
func TestS3CredentialsReachPodsThroughTheWorkspaceSecret(t *testing.T) {
	cs := newClient()
	var asked []string
	b := newBackend(t, cs,
		WithEnv(schemas.EnvVar{Name: EnvS3Endpoint, Value: "http://127.0.0.1:9000"}, schemas.EnvVar{Name: "HTTP_PROXY", Value: "http://proxy:3128"}),
		WithS3Credentials(func(_ context.Context, ws string) (S3Credentials, error) {
			asked = append(asked, ws)
			return testS3, nil
		}))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)

	if diff := cmp.Diff([]string{"vision"}, asked); diff != "" {
		t.Errorf("workspaces asked (-want +got):\n%s", diff)
	}
	sec, err := cs.CoreV1().Secrets("vision").Get(context.Background(), S3SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{EnvS3Endpoint: testS3.Endpoint, EnvS3Region: testS3.Region,
		EnvS3AccessKeyID: testS3.AccessKeyID, EnvS3SecretAccessKey: testS3.SecretAccessKey}
	got := map[string]string{}
	for k, v := range sec.Data {
		got[k] = string(v)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("secret data (-want +got):\n%s", diff)
	}
	if sec.Labels[LabelManagedBy] != ManagedByValue || sec.Labels[LabelWorkspace] != "vision" || sec.Type != corev1.SecretTypeOpaque {
		t.Errorf("secret labels %v, type %q", sec.Labels, sec.Type)
	}

	ps := pods(t, cs, "vision")
	if len(ps) != 3 {
		t.Fatalf("%d pods, want 3", len(ps))
	}
	for name, p := range ps {
		env := envOf(p.Spec.Containers[0])
		for _, v := range []string{EnvS3Endpoint, EnvS3Region, EnvS3AccessKeyID, EnvS3SecretAccessKey} {
			if diff := cmp.Diff(secretRef(v), env[v]); diff != "" {
				t.Errorf("%s: %s (-want +got):\n%s", name, v, diff)
			}
		}
		if env["HTTP_PROXY"].Value != "http://proxy:3128" {
			t.Errorf("%s: HTTP_PROXY %+v: the other defaults must stay", name, env["HTTP_PROXY"])
		}
		if n := len(p.Spec.Containers[0].Env); n != len(env) {
			t.Errorf("%s: %d variables, %d names: a name is duplicated", name, n, len(env))
		}
		for _, e := range p.Spec.Containers[0].Env {
			if strings.Contains(e.Value, testS3.SecretAccessKey) || strings.Contains(e.Value, testS3.AccessKeyID) {
				t.Errorf("%s: %s holds a credential in plain text", name, e.Name)
			}
		}
	}
}

// A job that sets an S3 variable itself keeps it.
func TestS3CredentialsJobEnvWins(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs, WithS3Credentials(StaticS3Credentials(testS3)))
	launch(t, b, gangOf(t, ddp("resnet").Env(EnvS3Endpoint, "http://minio.data:9000")))
	for name, p := range pods(t, cs, "vision") {
		env := envOf(p.Spec.Containers[0])
		if e := env[EnvS3Endpoint]; e.Value != "http://minio.data:9000" || e.ValueFrom != nil {
			t.Errorf("%s: %s = %+v, want the job's", name, EnvS3Endpoint, e)
		}
		if diff := cmp.Diff(secretRef(EnvS3AccessKeyID), env[EnvS3AccessKeyID]); diff != "" {
			t.Errorf("%s: %s (-want +got):\n%s", name, EnvS3AccessKeyID, diff)
		}
	}
}

// Launching again (a retried activity, the next job of the workspace) leaves one
// Secret, rewrites a Secret edited by hand, and drops keys the credentials no longer
// have; empty fields are neither in the Secret nor in the pods.
func TestS3SecretIsAppliedIdempotently(t *testing.T) {
	ctx := context.Background()
	cs := newClient()
	creds := S3Credentials{Endpoint: testS3.Endpoint, AccessKeyID: "k1", SecretAccessKey: "s1"}
	b := newBackend(t, cs, WithS3Credentials(func(context.Context, string) (S3Credentials, error) { return creds, nil }))
	g := gangOf(t, ddp("resnet"))
	launch(t, b, g)
	launch(t, b, g)

	sec, err := cs.CoreV1().Secrets("vision").Get(ctx, S3SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sec.Data[EnvS3Region]; ok {
		t.Errorf("empty region written: %v", sec.Data)
	}
	for name, p := range pods(t, cs, "vision") {
		if _, ok := envOf(p.Spec.Containers[0])[EnvS3Region]; ok {
			t.Errorf("%s: %s referenced, but the Secret has no such key", name, EnvS3Region)
		}
	}
	sec.Data[EnvS3SecretAccessKey] = []byte("tampered")
	if _, err := cs.CoreV1().Secrets("vision").Update(ctx, sec, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}

	creds.SecretAccessKey = "s2" // rotated
	launch(t, b, gangOf(t, ddp("bert")))
	list, err := cs.CoreV1().Secrets("vision").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d secrets, want 1", len(list.Items))
	}
	if got := string(list.Items[0].Data[EnvS3SecretAccessKey]); got != "s2" {
		t.Errorf("secret key %q after the next launch, want the rotated s2", got)
	}
}

// A failing credentials function fails the launch (retryably) before any pod exists.
func TestS3CredentialsErrorCreatesNoPod(t *testing.T) {
	cs := newClient()
	b := newBackend(t, cs, WithS3Credentials(func(context.Context, string) (S3Credentials, error) {
		return S3Credentials{}, errors.New("account service unavailable")
	}))
	err := b.Launch(context.Background(), gangOf(t, ddp("resnet")))
	if err == nil || !strings.Contains(err.Error(), "account service unavailable") || errors.Is(err, backend.ErrInvalidSpec) {
		t.Fatalf("Launch: %v, want the function's error, retryable", err)
	}
	if n := len(pods(t, cs, "vision")); n != 0 {
		t.Errorf("%d pods created", n)
	}
}
