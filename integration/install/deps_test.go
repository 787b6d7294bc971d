package install

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/opendlc/opendlc/checkpoint"
	"github.com/opendlc/opendlc/devstack"
	"github.com/opendlc/opendlc/events"
	ejs "github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/images"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
	"github.com/opendlc/opendlc/kubestack"
)

// depsNamespace holds the test installation's Temporal, NATS and S3: a user's existing
// services, in their own namespace.
const depsNamespace = "opendlc-deps"

// The dependencies' ports, and the bucket and Temporal namespace OpenDLC uses.
const (
	temporalPort      = 7233
	natsPort          = 4222
	natsMonitorPort   = 8222
	s3Port            = 7070
	bucket            = "dlc"
	temporalNamespace = "opendlc"
	// natsUser is the NATS user the chart's pods connect as (its Secret opendlc-nats).
	natsUser = devstack.NATSUserServer
)

// deps are the Temporal, NATS and S3 pods (images.Component) of depsNamespace: how the
// chart's pods reach them (Service names CoreDNS resolves to the pods' addresses) and
// how the host does (the pods' addresses, over the nodes' bridge), with their
// credentials.
type deps struct {
	// Temporal, NATS and S3 are host:port of the headless Services,
	// <svc>.<ns>.svc.cluster.local, for the chart's values.
	Temporal, NATS, S3 string
	// NATSPassword is natsUser's; S3AccessKey and S3SecretKey the gateway's root keys.
	NATSPassword, S3AccessKey, S3SecretKey string
	// natsPod and s3Pod are the pods' addresses, as the host dials them.
	natsPod, s3Pod string
}

// depImages are the dependencies' images, by component name (images.Components).
type depImages map[string]images.ComponentImage

// buildDepImages builds the dependencies' images (cached by their inputs).
func buildDepImages(ctx context.Context) (depImages, error) {
	out := depImages{}
	for _, name := range images.Components {
		c, err := images.Component(ctx, name)
		if err != nil {
			return nil, err
		}
		out[name] = c
	}
	return out, nil
}

// tarballs are the images' tarballs, for kubestack.Options.Images.
func (d depImages) tarballs() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(d)) {
		out = append(out, d[name].Tarball)
	}
	return out
}

func randomSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func svcAddr(svc string, port int) string {
	return net.JoinHostPort(svc+"."+depsNamespace+".svc.cluster.local", strconv.Itoa(port))
}

// startDeps runs Temporal (the dev server on SQLite), NATS (JetStream, users by
// password) and S3 (versitygw on a posix directory) as pods of their images in
// depsNamespace, each with its state in an emptyDir and a headless Service, waits until
// each serves (Temporal with OpenDLC's namespace and search attributes, S3 with the
// bucket), and returns how to reach them.
func startDeps(t *testing.T, ctx context.Context, cluster *kubestack.Cluster, imgs depImages) deps {
	t.Helper()
	start := time.Now()
	d := deps{
		Temporal: svcAddr("temporal", temporalPort), NATS: svcAddr("nats", natsPort), S3: svcAddr("s3", s3Port),
		NATSPassword: randomSecret(t), S3AccessKey: randomSecret(t)[:20], S3SecretKey: randomSecret(t),
	}
	core := cluster.Client.CoreV1()
	if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: depsNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// NATS' configuration: JetStream in the emptyDir (its limits the defaults, as the
	// devstack's: OpenDLC's streams reserve 8 GiB of file store), under a fixed server
	// name (its state is keyed by it, so a restarted container finds it), and the
	// chart's user with every permission, as the devstack's server identity has.
	natsConf := fmt.Sprintf(`server_name: opendlc-install-nats
listen: "0.0.0.0:%d"
http: "0.0.0.0:%d"
jetstream {
  store_dir: "/data"
}
authorization {
  users: [
    {user: %q, password: %q}
  ]
}
`, natsPort, natsMonitorPort, natsUser, d.NATSPassword)
	for name, data := range map[string]map[string]string{
		"nats-config": {"nats.conf": natsConf},
		// versitygw's own variables for its root account's keys.
		"s3-root": {"ROOT_ACCESS_KEY_ID": d.S3AccessKey, "ROOT_SECRET_ACCESS_KEY": d.S3SecretKey},
	} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: data}
		if _, err := core.Secrets(depsNamespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The Temporal dev server with the devstack's flags (devstack/temporal.go), on every
	// address of the pod: its services dial each other on loopback, so it cannot listen
	// on the pod's address alone.
	temporalArgs := []string{"server", "start-dev",
		"--ip", "0.0.0.0", "--port", strconv.Itoa(temporalPort), "--headless",
		"--db-filename", "/data/temporal.db", "--log-level", "warn",
		"--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal",
		"--dynamic-config-value", `history.transferProcessorUpdateAckInterval="1s"`,
		"--namespace", temporalNamespace,
	}
	for _, name := range slices.Sorted(maps.Keys(devstack.SearchAttributes)) {
		temporalArgs = append(temporalArgs, "--search-attribute", name+"="+devstack.SearchAttributes[name].String())
	}
	pods := []*corev1.Pod{
		depPod("temporal", imgs["temporal"].Ref, temporalArgs, temporalPort, corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(temporalPort)},
		}, nil, nil),
		depPod("nats", imgs["nats-server"].Ref, []string{"--config", "/etc/nats/nats.conf"}, natsPort, corev1.ProbeHandler{
			HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(natsMonitorPort)},
		}, &corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nats-config"}}}, nil),
		// versitygw with the devstack's flags (devstack/s3.go), the root keys from the
		// environment.
		depPod("s3", imgs["versitygw"].Ref, []string{"--region", devstack.DevRegion, "--port", ":" + strconv.Itoa(s3Port), "--quiet",
			"posix", "--dir-perms", "0700", "--file-perms", "0600", "/data"}, s3Port, corev1.ProbeHandler{
			TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(s3Port)},
		}, nil, []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s3-root"}}}}),
	}
	for _, p := range pods {
		if _, err := core.Pods(depsNamespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		port := p.Spec.Containers[0].Ports[0]
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": p.Name},
				Ports: []corev1.ServicePort{{Name: port.Name, Port: port.ContainerPort, TargetPort: intstr.FromInt32(port.ContainerPort)}},
			},
		}
		if _, err := core.Services(depsNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	for _, p := range pods {
		ips[p.Name] = waitPodReady(t, ctx, cluster, depsNamespace, p.Name)
	}
	d.natsPod = net.JoinHostPort(ips["nats"], strconv.Itoa(natsPort))
	d.s3Pod = net.JoinHostPort(ips["s3"], strconv.Itoa(s3Port))

	// Temporal serves OpenDLC's namespace with its search attributes.
	temporalPod := net.JoinHostPort(ips["temporal"], strconv.Itoa(temporalPort))
	testutil.Eventually(t, itest.Left(ctx), "Temporal in its pod serves namespace "+temporalNamespace+" with OpenDLC's search attributes", func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, err := client.DialContext(cctx, client.Options{HostPort: temporalPod, Namespace: temporalNamespace,
			Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		if err != nil {
			return err
		}
		defer c.Close()
		sa, err := c.OperatorService().ListSearchAttributes(cctx, &operatorservice.ListSearchAttributesRequest{Namespace: temporalNamespace})
		if err != nil {
			return err
		}
		for name := range devstack.SearchAttributes {
			if _, ok := sa.GetCustomAttributes()[name]; !ok {
				return fmt.Errorf("no search attribute %s", name)
			}
		}
		return nil
	}, time.Second)
	// S3 has the bucket.
	s3 := d.s3Host()
	testutil.Eventually(t, itest.Left(ctx), "the bucket "+bucket+" in S3 in its pod", func() error {
		return s3.CreateBuckets(ctx, bucket)
	}, time.Second)
	t.Logf("Temporal, NATS and S3 pods ready in %s: %s %s %s (pods %v)", time.Since(start).Round(100*time.Millisecond), d.Temporal, d.NATS, d.S3, ips)
	return d
}

// depPod is a pod running image with args, serving port (named after the pod), ready
// when probe passes, with its state in an emptyDir on /data and, when set, volume on
// /etc/<name> and envFrom.
func depPod(name, image string, args []string, port int32, probe corev1.ProbeHandler, volume *corev1.Volume, envFrom []corev1.EnvFromSource) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: new(int64(10)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot: new(true), RunAsUser: new(int64(images.NonRootUID)), FSGroup: new(int64(images.NonRootUID)),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name: name, Image: image, ImagePullPolicy: corev1.PullNever, Args: args,
				EnvFrom:        envFrom,
				Ports:          []corev1.ContainerPort{{Name: name, ContainerPort: port}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: probe, PeriodSeconds: 1, FailureThreshold: 3},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
			}},
		},
	}
	if volume != nil {
		p.Spec.Volumes = append(p.Spec.Volumes, *volume)
		c := &p.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume.Name, MountPath: "/etc/" + name, ReadOnly: true})
	}
	return p
}

// waitPodReady waits until the pod is Running and ready, and returns its address.
func waitPodReady(t *testing.T, ctx context.Context, cluster *kubestack.Cluster, ns, name string) string {
	t.Helper()
	var ip string
	testutil.Eventually(t, itest.Left(ctx), "pod "+ns+"/"+name+" ready", func() error {
		p, err := cluster.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning || !podReady(p) || p.Status.PodIP == "" {
			return fmt.Errorf("pod %s: %s, ready %v, %v", name, p.Status.Phase, podReady(p), p.Status.ContainerStatuses)
		}
		ip = p.Status.PodIP
		return nil
	}, itest.PollInterval)
	return ip
}

// s3Host is the S3 gateway as the host reaches it: its pod's address.
func (d deps) s3Host() *devstack.S3 {
	return &devstack.S3{Endpoint: "http://" + d.s3Pod, AccessKey: d.S3AccessKey, SecretKey: d.S3SecretKey, Region: devstack.DevRegion}
}

// checkpointConfig is the checkpoint store's configuration for S3 in its pod.
func (d deps) checkpointConfig() checkpoint.Config {
	return checkpoint.Config{Endpoint: "http://" + d.s3Pod, Region: devstack.DevRegion, AccessKey: d.S3AccessKey, SecretKey: d.S3SecretKey, PathStyle: true}
}

// stopNATS stops the NATS pod's container and keeps it stopped, its pod (address and
// emptyDir store) kept: the container is pointed at an image no node has, with pull
// policy Never, so the kubelet stops it (SIGTERM: the server shuts down cleanly) and
// cannot start it again (ErrImageNeverPull). startNATS points it back; a new container
// spec is not held back by the restart back-off.
func (d deps) stopNATS(t *testing.T, ctx context.Context, cluster *kubestack.Cluster) {
	t.Helper()
	setImage(t, ctx, cluster, "nats", images.Domain+"/absent:stopped")
	testutil.Eventually(t, itest.Left(ctx), "the NATS container stopped", func() error {
		p, err := cluster.Client.CoreV1().Pods(depsNamespace).Get(ctx, "nats", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running != nil {
				return fmt.Errorf("still running since %s", cs.State.Running.StartedAt)
			}
		}
		return nil
	}, itest.PollInterval)
	t.Log("NATS's container stopped, its pod kept")
}

// startNATS starts the NATS pod's container again (stopNATS), on its store.
func (d deps) startNATS(t *testing.T, ctx context.Context, cluster *kubestack.Cluster, image string) {
	t.Helper()
	start := time.Now()
	setImage(t, ctx, cluster, "nats", image)
	if ip := waitPodReady(t, ctx, cluster, depsNamespace, "nats"); net.JoinHostPort(ip, strconv.Itoa(natsPort)) != d.natsPod {
		t.Fatalf("NATS is back on %s, not on its pod's address %s", ip, d.natsPod)
	}
	t.Logf("NATS's container started again in its pod %s in %s", d.natsPod, time.Since(start).Round(100*time.Millisecond))
}

func setImage(t *testing.T, ctx context.Context, cluster *kubestack.Cluster, pod, image string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"containers": []map[string]any{{"name": pod, "image": image}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Client.CoreV1().Pods(depsNamespace).Patch(ctx, pod, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkStreamEvents reads the job's events straight from NATS, on the pod's address:
// the DLC_EVENTS stream holds them, a phase event reaching Succeeded among them, and no
// event twice.
func (d deps) checkStreamEvents(t *testing.T, ctx context.Context, ws, job string) {
	t.Helper()
	nc, err := nats.Connect("nats://"+d.natsPod, nats.UserInfo(natsUser, d.NATSPassword), nats.Timeout(10*time.Second))
	if err != nil {
		t.Fatalf("NATS on %s: %v", d.natsPod, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	subject := strings.TrimSuffix(events.JobStatusSubject(ws, job), ".status") + ".>"
	// An ephemeral consumer of the job's subjects, from the stream's first message.
	cons, err := js.CreateConsumer(rctx, ejs.EventsStream, jetstream.ConsumerConfig{
		FilterSubject: subject, DeliverPolicy: jetstream.DeliverAllPolicy, AckPolicy: jetstream.AckNonePolicy,
		InactiveThreshold: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	info := cons.CachedInfo()
	seen := map[string]int{}
	succeeded := false
	for n := info.NumPending; n > 0; {
		batch, err := cons.Fetch(int(n), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			var e events.Event
			if err := json.Unmarshal(m.Data(), &e); err != nil || e.ID == "" {
				t.Fatalf("event on %s: %v: %s", m.Subject(), err, m.Data())
			}
			seen[e.ID]++
			succeeded = succeeded || strings.Contains(string(e.Data), "Succeeded")
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			t.Fatal(err)
		}
		if got == 0 {
			t.Fatalf("%d of the job's events in %s not read", n, ejs.EventsStream)
		}
		n -= uint64(got)
	}
	for id, n := range seen {
		if n > 1 {
			t.Errorf("job %s: event %s %d times in %s", job, id, n, ejs.EventsStream)
		}
	}
	if len(seen) == 0 || !succeeded {
		t.Errorf("job %s: %d events in %s on %s, none saying Succeeded", job, len(seen), ejs.EventsStream, subject)
	}
	t.Logf("job %s: %d events in %s on NATS's pod %s", job, len(seen), ejs.EventsStream, d.natsPod)
}
