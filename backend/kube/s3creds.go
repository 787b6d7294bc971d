package kube

// S3 settings of a workspace's pods: the endpoint, region and access key pair that
// training code reads (checkpoint.ConfigFromEnv in Go, opendlc.env() in Python), held in
// a Secret the worker writes into the workspace's namespace and referenced by every pod
// of that workspace through valueFrom.secretKeyRef, so no credential is ever written in
// a pod spec.

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/opendlc/opendlc/backend"
	"github.com/opendlc/opendlc/schemas"
)

// S3SecretName is the Secret, in each workspace's namespace, that holds the S3 settings
// of the workspace's pods when WithS3Credentials is set. The name is reserved: the
// worker owns the Secret's contents and overwrites them on every launch.
const S3SecretName = "opendlc-s3"

// FieldManager is the worker's field manager for server-side apply.
const FieldManager = "opendlc-worker"

// The S3 variables of the training-code contract: the same names the local backend's
// replicas get from the worker's environment.
const (
	EnvS3Endpoint        = "DLC_S3_ENDPOINT"
	EnvS3Region          = "AWS_REGION"
	EnvS3AccessKeyID     = "AWS_ACCESS_KEY_ID"
	EnvS3SecretAccessKey = "AWS_SECRET_ACCESS_KEY"
)

// S3Credentials are how a workspace's pods reach S3. Each field is one key of the
// workspace's Secret, named after its variable (EnvS3Endpoint...); empty fields are
// left out of the Secret and of the pods' environment.
type S3Credentials struct {
	// Endpoint is the S3 endpoint URL as seen from the pods (DLC_S3_ENDPOINT).
	Endpoint string
	// Region is AWS_REGION.
	Region string
	// AccessKeyID and SecretAccessKey are the access key pair.
	AccessKeyID, SecretAccessKey string
}

// S3CredentialsFunc returns the S3 credentials of a workspace's pods. It is the one
// place that decides them: every Launch asks it for the gang's workspace and writes the
// answer into the workspace's Secret, so per-workspace accounts change only this
// function. An error fails the Launch as retryable.
type S3CredentialsFunc func(ctx context.Context, workspace string) (S3Credentials, error)

// StaticS3Credentials gives every workspace the same credentials: one S3 account for
// the whole installation.
func StaticS3Credentials(c S3Credentials) S3CredentialsFunc {
	return func(context.Context, string) (S3Credentials, error) { return c, nil }
}

// WithS3Credentials makes Launch write the workspace's S3 credentials (f) into the
// Secret S3SecretName of the gang's namespace (server-side apply: created or updated,
// a no-op when unchanged) and give every pod DLC_S3_ENDPOINT, AWS_REGION,
// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY from it through secretKeyRef. They win
// over WithEnv's and WithEnvFromSecret's variables of the same names; a job's own
// environment wins over them. Default: none (pods get only WithEnv and
// WithEnvFromSecret).
func WithS3Credentials(f S3CredentialsFunc) Option {
	return func(b *Backend) error {
		b.s3Creds = f
		return nil
	}
}

// data is the Secret's data: one key per non-empty field, in the contract's order.
func (c S3Credentials) data() []secretKey {
	var out []secretKey
	for _, kv := range []secretKey{
		{EnvS3Endpoint, c.Endpoint},
		{EnvS3Region, c.Region},
		{EnvS3AccessKeyID, c.AccessKeyID},
		{EnvS3SecretAccessKey, c.SecretAccessKey},
	} {
		if kv.value != "" {
			out = append(out, kv)
		}
	}
	return out
}

type secretKey struct{ name, value string }

// ensureS3Secret writes the workspace's S3 Secret into ns and returns the variables
// that reference it; none without WithS3Credentials. Server-side apply with force: one
// request whether the Secret exists or not, nothing written when it is unchanged, and
// a Secret edited by hand is put back.
func (b *Backend) ensureS3Secret(ctx context.Context, ns, workspace string) ([]corev1.EnvVar, error) {
	if b.s3Creds == nil {
		return nil, nil
	}
	creds, err := b.s3Creds(ctx, workspace)
	if err != nil {
		return nil, fmt.Errorf("kube: S3 credentials of workspace %q: %w", workspace, err)
	}
	keys := creds.data()
	if len(keys) == 0 {
		return nil, nil
	}
	data := make(map[string][]byte, len(keys))
	for _, k := range keys {
		data[k.name] = []byte(k.value)
	}
	secret := corev1ac.Secret(S3SecretName, ns).
		WithLabels(map[string]string{LabelManagedBy: ManagedByValue, LabelWorkspace: shorten(workspace, maxLabel)}).
		WithType(corev1.SecretTypeOpaque).
		WithData(data)
	_, err = b.client.CoreV1().Secrets(ns).Apply(ctx, secret, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	switch {
	case err == nil:
	case apierrors.IsInvalid(err):
		// A Secret of that name but another type (type is immutable).
		return nil, backend.InvalidSpec(fmt.Errorf("kube: secret %s/%s (reserved for OpenDLC's S3 settings): %w", ns, S3SecretName, err))
	default:
		if apierrors.IsNotFound(err) {
			b.forgetNamespace(ns)
		}
		return nil, fmt.Errorf("kube: apply secret %s/%s: %w", ns, S3SecretName, err)
	}
	refs := make([]corev1.EnvVar, len(keys))
	for i, k := range keys {
		refs[i] = corev1.EnvVar{Name: k.name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: S3SecretName}, Key: k.name,
		}}}
	}
	return refs, nil
}

// forgetNamespace drops ns from the namespaces known to exist (it was deleted since),
// so the next Launch creates it again.
func (b *Backend) forgetNamespace(ns string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.namespaces, ns)
}

// withS3Env puts the S3 variables refs into c's environment: each replaces the
// variable of its name where the backend's defaults (WithEnv) had put it, or is
// appended; a variable the job sets itself (jobEnv) is kept.
func withS3Env(c *corev1.Container, refs []corev1.EnvVar, jobEnv []schemas.EnvVar) {
	own := map[string]bool{}
	for _, e := range jobEnv {
		own[e.Name] = true
	}
	for _, ref := range refs {
		if own[ref.Name] {
			continue
		}
		i := 0
		for i < len(c.Env) && c.Env[i].Name != ref.Name {
			i++
		}
		if i == len(c.Env) {
			c.Env = append(c.Env, ref)
		} else {
			c.Env[i] = ref
		}
	}
}
