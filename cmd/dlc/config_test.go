package main

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/schemas"
)

// configLeaves are the paths of Config's fields that hold values.
func configLeaves(t reflect.Type, p string) []string {
	if t.Kind() != reflect.Struct {
		return []string{p}
	}
	var leaves []string
	for name, f := range jsonFields(t) {
		q := name
		if p != "" {
			q = p + "." + name
		}
		leaves = append(leaves, configLeaves(f.Type, q)...)
	}
	return leaves
}

// Every flag of dlc server and dlc worker but --config sets one field of Config, and
// every field of Config has a flag: setting the flag changes the field, and nothing else.
func TestEveryFlagIsAConfigField(t *testing.T) {
	flagged := map[string]bool{}
	for _, newCmd := range []func() *cobraCommand{newServerCmd, newWorkerCmd, newNotifierCmd} {
		cmd := newCmd()
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Name == "config" {
				return
			}
			cf, ok := fieldOfFlag(f.Name)
			if !ok {
				t.Errorf("dlc %s --%s is in no configFields entry", cmd.Name(), f.Name)
				return
			}
			flagged[cf.path] = true
			// Setting the flag changes its field, and only it.
			o := configOptions{command: cmd.Name()}
			fs := pflag.NewFlagSet(cmd.Name(), pflag.ContinueOnError)
			o.bind(fs)
			before := o.Config
			field := configValue(&o.Config, cf.path)
			if !field.IsValid() {
				t.Errorf("--%s: Config has no field %s", f.Name, cf.path)
				return
			}
			if err := fs.Set(f.Name, sampleValue(f)); err != nil {
				t.Errorf("--%s %s: %v", f.Name, sampleValue(f), err)
				return
			}
			after := o.Config
			if reflect.DeepEqual(configValue(&before, cf.path).Interface(), field.Interface()) {
				t.Errorf("--%s %s left %s at %v", f.Name, sampleValue(f), cf.path, field.Interface())
			}
			configValue(&after, cf.path).Set(configValue(&before, cf.path))
			if !reflect.DeepEqual(before, after) {
				t.Errorf("--%s changed other fields than %s", f.Name, cf.path)
			}
		})
	}
	for _, leaf := range configLeaves(reflect.TypeFor[Config](), "") {
		if !flagged[leaf] {
			t.Errorf("Config field %s has no flag", leaf)
		}
	}
	for _, cf := range configFields {
		if !flagged[cf.path] {
			t.Errorf("configFields entry %+v: no command has the flag", cf)
		}
	}
}

type cobraCommand = cobra.Command

// sampleValue is a value for flag f that differs from its default.
func sampleValue(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		if f.DefValue == "true" {
			return "false"
		}
		return "true"
	case "int", "int64", "float64":
		return "7"
	case "duration":
		return "7m"
	case "stringToString":
		return "k=v"
	case "stringArray", "stringSlice":
		return "spot=x=y"
	}
	return "sample"
}

// A config file's fields land in Config; fields it leaves out keep their defaults.
func TestDecodeConfig(t *testing.T) {
	c := defaultConfig()
	err := decodeConfig([]byte(`
temporal:
  address: temporal.internal:7233
  tls: {cert: /c.pem, key: /k.pem}
nats:
  url: nats://nats:4222
  streamReplicas: 3
storage:
  logArchive: {retention: 720h}
worker:
  kubernetes:
    kubeconfig: in-cluster
    podAnnotations: {a: b}
    pools:
      selector: [spot=lifecycle=spot]
    grace: {nodeLost: 90s, stop: 2m}
`), &c)
	if err != nil {
		t.Fatal(err)
	}
	k := c.Worker.Kubernetes
	if c.Temporal.Address != "temporal.internal:7233" || c.Temporal.Namespace != "default" || c.NATS.StreamReplicas != 3 ||
		time.Duration(c.Storage.LogArchive.Retention) != 720*time.Hour || k.Kubeconfig != "in-cluster" ||
		k.PodAnnotations["a"] != "b" || !slices.Equal(k.Pools.Selector, []string{"spot=lifecycle=spot"}) ||
		time.Duration(k.Grace.NodeLost) != 90*time.Second || time.Duration(k.Grace.Stop) != 2*time.Minute || k.LaunchConcurrency != defaultConfig().Worker.Kubernetes.LaunchConcurrency {
		t.Errorf("decoded %+v", c)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Errorf("Validate: %v", errs)
	}
}

// A bad file's every problem names its field.
func TestDecodeConfigNamesFields(t *testing.T) {
	for doc, want := range map[string][]string{
		"temporal: {addr: x}":                                  {"temporal.addr: unknown field"},
		"worker: {kubernetes: {pool: {}}, gpu: 1}":             {"worker.gpu: unknown field", "worker.kubernetes.pool: unknown field"},
		"worker: {longHeartbeatTimeout: 5}":                    {"worker.longHeartbeatTimeout: 5 is no duration"},
		"storage: {logArchive: {retention: weekly}}":           {"storage.logArchive.retention: weekly is no duration"},
		"nats: {streamReplicas: three}":                        {"nats.streamReplicas: must be an integer"},
		"worker: {local: {gpus: [1]}}":                         {"worker.local.gpus: must be an integer"},
		"temporal: x":                                          {"temporal: must be a mapping"},
		"temporal: {address: a}\ntemporal: {namespace: b}":     {"temporal: set twice, on lines 1 and 2"},
		"worker: {kubernetes: {podAnnotations: {a: x, a: y}}}": {"worker.kubernetes.podAnnotations.a: set twice"},
	} {
		c := defaultConfig()
		err := decodeConfig([]byte(doc), &c)
		list, ok := errors.AsType[schemas.ErrorList](err)
		if !ok || len(list) != len(want) {
			t.Errorf("%s: %v, want %q", doc, err, want)
			continue
		}
		for i, w := range want {
			if !strings.HasPrefix(list[i].Error(), w) {
				t.Errorf("%s: %q, want %q", doc, list[i].Error(), w)
			}
		}
	}
}

// Validate names the field of every problem.
func TestConfigValidateNamesFields(t *testing.T) {
	for want, change := range map[string]func(*Config){
		"temporal.address: required":                                       func(c *Config) { c.Temporal.Address = "" },
		"nats.url: required":                                               func(c *Config) { c.NATS.URL = "" },
		"temporal.tls.cert: required with temporal.tls.key":                func(c *Config) { c.Temporal.TLS.Key = "k" },
		"temporal.tls.key: required with temporal.tls.cert":                func(c *Config) { c.Temporal.TLS.Cert = "c" },
		"api.tls.key: required with api.tls.cert":                          func(c *Config) { c.API.TLS.Cert = "c" },
		"nats.streamReplicas: 9":                                           func(c *Config) { c.NATS.StreamReplicas = 9 },
		"storage.logArchive.retention: -1s is negative":                    func(c *Config) { c.Storage.LogArchive.Retention = Duration(-time.Second) },
		"worker.heartbeatBudget: 0 is not positive":                        func(c *Config) { c.Worker.HeartbeatBudget = 0 },
		"worker.longHeartbeatTimeout: 1s is below":                         func(c *Config) { c.Worker.LongHeartbeatTimeout = Duration(time.Second) },
		"worker.local.gpus: -1 is negative":                                func(c *Config) { c.Worker.Local.GPUs = -1 },
		"worker.kubernetes.podS3Endpoint: \"http://s3\": only pods use it": func(c *Config) { c.Worker.Kubernetes.PodS3Endpoint = "http://s3" },
		"worker.kubernetes.podS3Endpoint: \"s3:9000\": want an http://": func(c *Config) {
			c.Worker.Kubernetes.Kubeconfig, c.Worker.Kubernetes.PodS3Endpoint = "kc", "s3:9000"
		},
		"worker.kubernetes.launchConcurrency: 0 is less than 1": func(c *Config) { c.Worker.Kubernetes.LaunchConcurrency = 0 },
		"worker.kubernetes.client.qps: 0 is not positive":       func(c *Config) { c.Worker.Kubernetes.Client.QPS = 0 },
		"worker.kubernetes.client.burst: 0 is less than 1":      func(c *Config) { c.Worker.Kubernetes.Client.Burst = 0 },
		"worker.kubernetes.pod.shmSize: \"lots\"":               func(c *Config) { c.Worker.Kubernetes.Pod.ShmSize = "lots" },
		"worker.kubernetes.grace.imagePull: -1s is negative":    func(c *Config) { c.Worker.Kubernetes.Grace.ImagePull = Duration(-time.Second) },
		"worker.kubernetes.grace.nodeLost: -1s is negative":     func(c *Config) { c.Worker.Kubernetes.Grace.NodeLost = Duration(-time.Second) },
		"worker.kubernetes.grace.stop: -1s is negative":         func(c *Config) { c.Worker.Kubernetes.Grace.Stop = Duration(-time.Second) },
		"worker.kubernetes.pools.selector: \"cheap=a=b\": pool must be one of": func(c *Config) {
			c.Worker.Kubernetes.Pools.Selector = []string{"cheap=a=b"}
		},
		"worker.kubernetes.batch.gangScheduler: \"spot=slurm\"": func(c *Config) {
			c.Worker.Kubernetes.Batch.GangScheduler = []string{"spot=slurm"}
		},
	} {
		c := defaultConfig()
		change(&c)
		errs := c.Validate()
		if len(errs) != 1 || !strings.HasPrefix(errs[0].Error(), want) {
			t.Errorf("%v, want one error %q", errs, want)
		}
	}
	c := defaultConfig()
	if errs := c.Validate(); len(errs) != 0 {
		t.Errorf("the defaults: %v", errs)
	}
}

// Flags override the variables, which override the file; a problem is named by the flag
// or variable that set the field, else by its path in the file.
func TestConfigPrecedence(t *testing.T) {
	file := filepath.Join(t.TempDir(), "dlc.yaml")
	if err := os.WriteFile(file, []byte("temporal: {address: file:7233, namespace: filens}\nnats: {url: nats://file:4222}\nworker: {heartbeatBudget: 5, kubernetes: {launchConcurrency: 0}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DLC_TEMPORAL_ADDRESS", "env:7233")
	t.Setenv("DLC_NATS_URL", "nats://env:4222")
	o := configOptions{command: workerCommand}
	fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
	o.bind(fs)
	if err := fs.Parse([]string{"--config", file, "--nats", "nats://flag:4222", "--kube-burst", "0"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(fs); err != nil {
		t.Fatal(err)
	}
	c := o.Config
	if c.Temporal.Address != "env:7233" || c.Temporal.Namespace != "filens" || c.NATS.URL != "nats://flag:4222" || c.Worker.HeartbeatBudget != 5 {
		t.Errorf("merged %+v", c)
	}
	err := o.Validate()
	for _, want := range []string{"worker.kubernetes.launchConcurrency: 0 is less than 1", "--kube-burst: 0 is less than 1"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v, want %q", err, want)
		}
	}

	// A flag's partner missing: named by its field, the flag that set the other by its name.
	o = configOptions{command: serverCommand}
	fs = pflag.NewFlagSet("server", pflag.ContinueOnError)
	o.bind(fs)
	if err := fs.Parse([]string{"--temporal-tls-cert", "c.pem"}); err != nil {
		t.Fatal(err)
	}
	if err := o.Complete(fs); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err == nil || err.Error() != "temporal.tls.key: required with --temporal-tls-cert" {
		t.Errorf("--temporal-tls-cert alone: %v", err)
	}

	// A bad file is refused naming the file and the field.
	if err := os.WriteFile(file, []byte("nats: {urls: [x]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c2 := newRoot()
	c2.SetArgs([]string{"server", "--config", file})
	if err := c2.Execute(); err == nil || !strings.Contains(err.Error(), file+": nats.urls: unknown field") {
		t.Errorf("dlc server --config with an unknown field: %v", err)
	}
	t.Setenv(envStreamReplicas, "three")
	c3 := newRoot()
	c3.SetArgs([]string{"server"})
	if err := c3.Execute(); err == nil || !strings.Contains(err.Error(), envStreamReplicas) {
		t.Errorf("dlc server with %s=three: %v", envStreamReplicas, err)
	}
}

// The example of docs/configuration.md decodes and is valid.
func TestConfigurationDocExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/configuration.md has no yaml example")
	}
	c := defaultConfig()
	if err := decodeConfig([]byte(example), &c); err != nil {
		t.Fatalf("the example: %v", err)
	}
	if errs := c.Validate(); len(errs) != 0 {
		t.Errorf("the example: %v", errs)
	}
	if c.Worker.Kubernetes.Client.QPS != 100 || c.API.TLS.Key == "" {
		t.Errorf("the example decoded to %+v", c)
	}
}

// worker.local.sandbox: refused where the host cannot give it, naming the flag or the
// variable that asked for it, and with --kubeconfig; its sandbox forwards the loopback
// S3 endpoint, refuses a remote one, and hides every credential file the worker was
// given, its config file and its state directory.
func TestWorkerLocalSandbox(t *testing.T) {
	parse := func(t *testing.T, args ...string) *workerOptions {
		t.Helper()
		o := &workerOptions{configOptions{command: workerCommand}}
		fs := pflag.NewFlagSet("worker", pflag.ContinueOnError)
		o.bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := o.Complete(fs); err != nil {
			t.Fatal(err)
		}
		return o
	}
	if c := defaultConfig(); c.Worker.Local.Sandbox {
		t.Error("dlc worker sandboxes local replicas by default; want it off so that existing deployments do not change")
	}
	old := sandboxAvailable
	t.Cleanup(func() { sandboxAvailable = old })
	sandboxAvailable = func() error { return errors.New("the sandbox needs bwrap") }
	if err := parse(t, "--local-sandbox").Validate(); err == nil || !strings.Contains(err.Error(), "--local-sandbox: this host cannot give it: the sandbox needs bwrap") {
		t.Errorf("--local-sandbox without bwrap: %v", err)
	}
	t.Setenv("DLC_LOCAL_SANDBOX", "true")
	if err := parse(t).Validate(); err == nil || !strings.Contains(err.Error(), "$DLC_LOCAL_SANDBOX: this host cannot give it") {
		t.Errorf("DLC_LOCAL_SANDBOX=true without bwrap: %v", err)
	}
	t.Setenv("DLC_LOCAL_SANDBOX", "")
	sandboxAvailable = func() error { return nil }
	if err := parse(t, "--local-sandbox", "--kubeconfig", "kc").Validate(); err == nil || !strings.Contains(err.Error(), "--local-sandbox: only the local backend has a sandbox") {
		t.Errorf("--local-sandbox --kubeconfig: %v", err)
	}

	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "dlc.yaml")
	if err := os.WriteFile(cfgFile, []byte("nats: {creds: /secrets/nats.creds}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := parse(t, "--config", cfgFile, "--local-sandbox", "--nats-tls-cert", "/secrets/n.crt", "--nats-tls-key", "/secrets/n.key",
		"--temporal-tls-cert", "/secrets/t.crt", "--temporal-tls-key", "/secrets/t.key", "--nats-tls-ca", "/secrets/ca.crt", "--state-dir", "/var/lib/dlc")
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	sb, err := o.sandbox("http://127.0.0.1:9000")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"127.0.0.1:9000"}; !slices.Equal(sb.Forward, want) {
		t.Errorf("Forward %v, want %v", sb.Forward, want)
	}
	want := []string{"/secrets/nats.creds", "/secrets/n.crt", "/secrets/n.key", "/secrets/t.crt", "/secrets/t.key", cfgFile, "/var/lib/dlc"}
	if !slices.Equal(sb.Hide, want) {
		t.Errorf("Hide %v, want %v", sb.Hide, want)
	}
	if sb, err := o.sandbox("http://localhost"); err == nil {
		t.Errorf("a host name, not a loopback IP: %+v", sb)
	}
	if _, err := o.sandbox("https://s3.example.com"); err == nil || !strings.Contains(err.Error(), "--local-sandbox: DLC_S3_ENDPOINT \"https://s3.example.com\"") {
		t.Errorf("a remote S3 endpoint: %v", err)
	}
	if sb, err := o.sandbox("https://[::1]"); err != nil || !slices.Equal(sb.Forward, []string{"[::1]:443"}) {
		t.Errorf("https://[::1]: %+v %v", sb, err)
	}

	// The worker's app.Config carries it to the local backend.
	t.Setenv("DLC_S3_ENDPOINT", "http://127.0.0.1:9000")
	cfg := parse(t, "--local-sandbox", "--state-dir", dir).mustAppConfig(t)
	if n := len(parse(t).mustAppConfig(t).LocalOptions); len(cfg.LocalOptions) != n+2 { // --state-dir and the sandbox
		t.Errorf("%d local options with the sandbox and a state dir, %d without", len(cfg.LocalOptions), n)
	}
}

func (o *workerOptions) mustAppConfig(t *testing.T) app.Config {
	t.Helper()
	cfg, err := o.appConfig()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
