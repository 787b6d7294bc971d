package realnode

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/internal/testutil"
)

// probeScript runs in every replica and prints one line, "probe <json>", with what the
// container sees: its environment, user, home, /dev/shm size, the mounted volumes'
// contents, the service account token's subject, and where MASTER_ADDR resolves.
const probeScript = `
import json, os, socket, base64
def read(p):
    try:
        with open(p) as f: return f.read()
    except OSError as e: return "ERR " + type(e).__name__
st = os.statvfs("/dev/shm")
scratch = "ok"
try:
    with open("/scratch/x", "w") as f: f.write("x")
except OSError as e: scratch = "ERR " + type(e).__name__
tok = read("/var/run/secrets/kubernetes.io/serviceaccount/token")
sub = ""
if not tok.startswith("ERR"):
    body = tok.split(".")[1]
    sub = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))["sub"]
import time
# A peer's record appears once its pod has an address: look it up as a rendezvous
# would, retrying for a while.
for _ in range(60):
    try:
        master_ip = socket.gethostbyname(os.environ.get("MASTER_ADDR", ""))
        break
    except OSError as e:
        master_ip = "ERR " + str(e)
        time.sleep(0.5)
rank = os.environ.get("RANK", "")
with open("/data/rank-" + rank, "w") as f: f.write(socket.gethostname())
print("probe " + json.dumps({"env": dict(os.environ), "uid": os.getuid(), "home": os.path.expanduser("~"),
    "shm": st.f_blocks * st.f_frsize, "scratch": scratch, "cfg": read("/cfg/a"), "sec": read("/sec/b"),
    "sa": sub, "master_ip": master_ip, "my_ip": socket.gethostbyname(socket.gethostname()),
    "cwd": os.getcwd()}), flush=True)
`

// probe is what probeScript printed.
type probe struct {
	Env      map[string]string `json:"env"`
	UID      int               `json:"uid"`
	Home     string            `json:"home"`
	Shm      int64             `json:"shm"`
	Scratch  string            `json:"scratch"`
	Cfg      string            `json:"cfg"`
	Sec      string            `json:"sec"`
	SA       string            `json:"sa"`
	MasterIP string            `json:"master_ip"`
	MyIP     string            `json:"my_ip"` // from the hosts file the kubelet writes
	Cwd      string            `json:"cwd"`
}

// Inside the containers of a 2-replica PyTorch job, on the root and the non-root
// variant of the training image: the framework's variables are what the pod spec says
// (and what docs/frameworks.md lists for torchrun's env:// rendezvous), MASTER_ADDR
// resolves to the master pod's address, the process runs as the image's user with its
// home, /dev/shm has the size spec.pod.shmSize asked for, and the emptyDir, ConfigMap,
// Secret and PVC volumes and the service account token are mounted.
func TestContainerSeesTheFrameworkContract(t *testing.T) {
	t.Parallel()
	// Its two jobs run one after the other.
	reserve(t, "500m", "500m")
	ctx := itest.Context(t, 8*time.Minute)
	const ws = "rn-env"
	cs := env.cluster.Client
	mustCreate := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.CoreV1().ConfigMaps(ws).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"a": "config-1"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec"}, StringData: map[string]string{"b": "secret-2"}}, metav1.CreateOptions{})
	mustCreate(err)
	_, err = cs.CoreV1().ServiceAccounts(ws).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "trainer-sa"}}, metav1.CreateOptions{})
	mustCreate(err)
	// A statically provisioned volume on the machine, bound to the workspace's claim.
	pvDir := filepath.Join(env.dir, "pv-"+ws)
	if err := os.MkdirAll(pvDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pvDir, 0o777); err != nil { // the non-root replicas write here too
		t.Fatal(err)
	}
	capacity := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	_, err = cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ws},
		Spec: corev1.PersistentVolumeSpec{
			Capacity: capacity, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: pvDir}},
			ClaimRef:               &corev1.ObjectReference{Namespace: ws, Name: "data"},
			StorageClassName:       "",
		},
	}, metav1.CreateOptions{})
	mustCreate(err)
	empty := ""
	_, err = cs.CoreV1().PersistentVolumeClaims(ws).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, VolumeName: "pv-" + ws,
			StorageClassName: &empty, Resources: corev1.VolumeResourceRequirements{Requests: capacity},
		},
	}, metav1.CreateOptions{})
	mustCreate(err)

	for _, variant := range []struct {
		name, image, home string
		uid               int
	}{
		{"root", env.training.Root.Ref, "/root", 0},
		{"nonroot", env.training.NonRoot.Ref, "/home/trainer", 1000},
	} {
		t.Run(variant.name, func(t *testing.T) {
			name := "probe-" + variant.name
			script := strings.ReplaceAll(probeScript, `"/data/rank-"`, fmt.Sprintf(`"/data/%s-rank-"`, variant.name))
			spec := fmt.Sprintf(`
apiVersion: opendlc.io/v1alpha1
kind: TrainingJob
metadata: {name: %s, workspace: %s}
spec:
  image: %s
  framework: pytorch
  command: [/usr/bin/python3, -c, %q]
  roles:
    master: {replicas: 1, resources: {cpu: "500m", memory: 512Mi}}
    worker: {replicas: 1, resources: {cpu: "500m", memory: 512Mi}}
  pod:
    serviceAccountName: trainer-sa
    shmSize: 256Mi
    volumes:
      - {name: scratch, mountPath: /scratch, emptyDir: {}}
      - {name: cfg, mountPath: /cfg, configMap: {name: cfg}}
      - {name: sec, mountPath: /sec, secret: {secretName: sec}}
      - {name: data, mountPath: /data, pvc: {claimName: data}}
  timeout: 5m
`, name, ws, variant.image, script)
			submit(t, ctx, spec)
			var pods []corev1.Pod
			testutil.Eventually(t, itest.Left(ctx), name+"'s 2 pods", func() bool {
				pods = jobPods(t, ctx, ws, name)
				return len(pods) == 2
			}, itest.PollInterval)
			specEnv := map[string]map[string]string{} // pod → literal env of its container
			for _, p := range pods {
				m := map[string]string{}
				for _, e := range p.Spec.Containers[0].Env {
					if e.ValueFrom == nil {
						m[e.Name] = e.Value
					}
				}
				specEnv[p.Labels["opendlc.io/role"]] = m
			}
			mustSucceed(t, ctx, ws, name)
			probes := map[string]probe{}
			for _, r := range jobLogs(t, ctx, ws, name) {
				if js, ok := strings.CutPrefix(r.Line, "probe "); ok {
					var p probe
					if err := json.Unmarshal([]byte(js), &p); err != nil {
						t.Fatalf("%s: %v", r.Replica, err)
					}
					probes[r.Role] = p
				}
			}
			if len(probes) != 2 {
				t.Fatalf("probes from roles %v, want master and worker", probes)
			}
			masterIP := probes["master"].MyIP
			for role, p := range probes {
				for k, v := range specEnv[role] {
					if p.Env[k] != v {
						t.Errorf("%s: %s=%q in the container, %q in the pod spec", role, k, p.Env[k], v)
					}
				}
				// torchrun's env:// rendezvous (docs/frameworks.md, pytorch).
				for _, k := range []string{"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"} {
					if p.Env[k] == "" {
						t.Errorf("%s: %s not set in the container", role, k)
					}
				}
				if p.Env["WORLD_SIZE"] != "2" {
					t.Errorf("%s: WORLD_SIZE=%q, want 2", role, p.Env["WORLD_SIZE"])
				}
				if want := map[string]string{"master": "0", "worker": "1"}[role]; p.Env["RANK"] != want {
					t.Errorf("%s: RANK=%q, want %s", role, p.Env["RANK"], want)
				}
				if masterIP == "" || p.MasterIP != masterIP || net.ParseIP(p.MasterIP) == nil {
					t.Errorf("%s: MASTER_ADDR %q resolves to %q in the container, want the master pod's %q", role, p.Env["MASTER_ADDR"], p.MasterIP, masterIP)
				}
				if p.UID != variant.uid || p.Home != variant.home {
					t.Errorf("%s: uid %d home %q, want the image's user %d with home %s", role, p.UID, p.Home, variant.uid, variant.home)
				}
				if p.Cwd != "/opt/opendlc" {
					t.Errorf("%s: working directory %q, want the image's /opt/opendlc", role, p.Cwd)
				}
				if p.Shm != 256<<20 {
					t.Errorf("%s: /dev/shm is %d bytes, want 256Mi", role, p.Shm)
				}
				if p.Scratch != "ok" || p.Cfg != "config-1" || p.Sec != "secret-2" {
					t.Errorf("%s: emptyDir write %q, configMap a=%q, secret b=%q; want ok, config-1, secret-2", role, p.Scratch, p.Cfg, p.Sec)
				}
				if want := "system:serviceaccount:" + ws + ":trainer-sa"; p.SA != want {
					t.Errorf("%s: service account token of %q, want %q", role, p.SA, want)
				}
			}
			// Both replicas wrote to the claim's volume on the machine.
			for _, rank := range []string{"0", "1"} {
				if _, err := os.Stat(filepath.Join(pvDir, variant.name+"-rank-"+rank)); err != nil {
					t.Errorf("rank %s's file on the persistent volume: %v", rank, err)
				}
			}
		})
	}
}
