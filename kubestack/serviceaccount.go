package kubestack

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// minTokenTTL is the shortest lifetime the TokenRequest API grants.
const minTokenTTL = 10 * time.Minute

// ServiceAccountKubeconfig returns a kubeconfig (written to
// Dir/sa-<namespace>-<name>.kubeconfig) and the matching REST config that
// authenticate as the service account namespace/name with a bound token
// from the TokenRequest API, so that a component under test runs with
// exactly the RBAC the test grants that account and nothing more. The
// namespace and the service account are created if missing. A ttl below
// ten minutes, the API's minimum, is raised to it; 0 means one hour.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string, ttl time.Duration) (path string, cfg *rest.Config, err error) {
	if ttl == 0 {
		ttl = time.Hour
	}
	ttl = max(ttl, minTokenTTL)
	_, err = c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("kubestack: create namespace %s: %w", namespace, err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	_, err = c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, fmt.Errorf("kubestack: create service account %s/%s: %w", namespace, name, err)
	}
	seconds := int64(ttl / time.Second)
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}},
		metav1.CreateOptions{})
	if err != nil {
		return "", nil, fmt.Errorf("kubestack: token for service account %s/%s: %w", namespace, name, err)
	}
	path, err = c.writeKubeconfig("sa-"+sanitize(namespace)+"-"+sanitize(name), namespace, &clientcmdapi.AuthInfo{Token: tr.Status.Token})
	if err != nil {
		return "", nil, err
	}
	cfg, err = restConfigFromKubeconfig(path)
	if err != nil {
		return "", nil, err
	}
	return path, cfg, nil
}
