package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	yamlv3 "gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/opendlc/opendlc/activities"
	"github.com/opendlc/opendlc/app"
	"github.com/opendlc/opendlc/backend/kube"
	"github.com/opendlc/opendlc/backend/local"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/events/jetstream"
	"github.com/opendlc/opendlc/notify"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/workflows"
)

// Config is the configuration of `dlc server` and `dlc worker`: the file that --config
// names (YAML, decoded strictly), the DLC_* variables and the flags, in that order of
// precedence from lowest to highest; each flag sets one field (configFields). One
// file may serve both commands: the server reads api, the worker reads worker, both
// the rest. docs/configuration.md describes every field.
type Config struct {
	Temporal TemporalConfig `json:"temporal"`
	NATS     NATSConfig     `json:"nats"`
	Storage  StorageConfig  `json:"storage"`
	Metrics  MetricsConfig  `json:"metrics"`
	Log      LogConfig      `json:"log"`
	// API is `dlc server`'s.
	API APIConfig `json:"api"`
	// Worker is `dlc worker`'s.
	Worker WorkerConfig `json:"worker"`
	// Notifications is `dlc notifier`'s.
	Notifications NotificationsConfig `json:"notifications"`
	// Secrets are the secrets documents name by reference (`dlc server`'s trigger
	// webhooks, `dlc notifier`'s rules).
	Secrets SecretsConfig `json:"secrets"`
	// Runs is the run record database (`dlc server` and `dlc worker`).
	Runs RunsConfig `json:"runs"`
}

// RunsConfig is app.RunsConfig in the file.
type RunsConfig struct {
	Database  string   `json:"database"`
	Retention Duration `json:"retention"`
}

// NotificationsConfig is the notification dispatcher of `dlc notifier`.
type NotificationsConfig struct {
	// WebhookAllow names the internal destinations webhooks and SMTP servers may reach.
	WebhookAllow []string `json:"webhookAllow"`
	// ConsoleURL is the web console's external base URL that messages link to.
	ConsoleURL string `json:"consoleURL"`
}

// SecretsConfig is where the secrets named by reference are read (notify.DirSecrets).
type SecretsConfig struct {
	Dir string `json:"dir"`
}

// TemporalConfig is the connection to Temporal.
type TemporalConfig struct {
	Address   string            `json:"address"`
	Namespace string            `json:"namespace"`
	TLS       TemporalTLSConfig `json:"tls"`
}

// TemporalTLSConfig is Temporal over (mutual) TLS: a client certificate and key, the CA
// of the frontend's certificate and the name to verify it against.
type TemporalTLSConfig struct {
	Cert       string `json:"cert"`
	Key        string `json:"key"`
	CA         string `json:"ca"`
	ServerName string `json:"serverName"`
}

// NATSConfig is the connection to NATS. User and password come from DLC_NATS_USER and
// DLC_NATS_PASSWORD only, never from a flag or the file.
type NATSConfig struct {
	URL            string        `json:"url"`
	Creds          string        `json:"creds"`
	StreamReplicas int           `json:"streamReplicas"`
	TLS            NATSTLSConfig `json:"tls"`
}

// NATSTLSConfig is NATS over TLS: the servers' CA and a client certificate and key.
type NATSTLSConfig struct {
	CA   string `json:"ca"`
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// StorageConfig is the workspaces' default S3 locations and the log archive.
type StorageConfig struct {
	Root       string           `json:"root"`
	LogArchive LogArchiveConfig `json:"logArchive"`
}

// LogArchiveConfig is app.LogArchiveConfig in the file.
type LogArchiveConfig struct {
	Root      string   `json:"root"`
	Retention Duration `json:"retention"`
}

// MetricsConfig is where the process serves /metrics; "" does not serve them.
type MetricsConfig struct {
	Addr string `json:"addr"`
}

// LogConfig is the process's log.
type LogConfig struct {
	// Verbose logs at info level instead of warn.
	Verbose bool `json:"verbose"`
}

// APIConfig is the HTTP API of `dlc server`.
type APIConfig struct {
	Addr           string       `json:"addr"`
	AdminTokenFile string       `json:"adminTokenFile"`
	TLS            APITLSConfig `json:"tls"`
}

// APITLSConfig serves the API over HTTPS.
type APITLSConfig struct {
	Cert string `json:"cert"`
	Key  string `json:"key"`
}

// WorkerConfig is `dlc worker`: its heartbeats and its backend, local processes unless
// kubernetes.kubeconfig is set.
type WorkerConfig struct {
	HeartbeatBudget      float64          `json:"heartbeatBudget"`
	ResourceInterval     Duration         `json:"resourceInterval"`
	LongHeartbeatTimeout Duration         `json:"longHeartbeatTimeout"`
	Local                LocalConfig      `json:"local"`
	Kubernetes           KubernetesConfig `json:"kubernetes"`
}

// LocalConfig is the local backend.
type LocalConfig struct {
	StateDir string `json:"stateDir"`
	WorkDir  string `json:"workDir"`
	GPUs     int    `json:"gpus"`
	// Sandbox runs every replica in the local backend's sandbox (local.WithSandbox):
	// its workspace's own user, no view of the worker's credential files, state
	// directory or environment, and no network but its gang's and the S3 endpoint's.
	// It needs Linux, root and bubblewrap, and an S3 endpoint on a loopback IP.
	Sandbox bool `json:"sandbox"`
}

// KubernetesConfig is the kubernetes backend, used when Kubeconfig is set.
type KubernetesConfig struct {
	Kubeconfig        string            `json:"kubeconfig"`
	Namespaces        []string          `json:"namespaces"`
	NamespacePrefix   string            `json:"namespacePrefix"`
	S3Secret          string            `json:"s3Secret"`
	PodS3Endpoint     string            `json:"podS3Endpoint"`
	PodAnnotations    map[string]string `json:"podAnnotations"`
	HealthChecks      bool              `json:"healthChecks"`
	NodeStats         bool              `json:"nodeStats"`
	DCGMExporterPort  int               `json:"dcgmExporterPort"`
	HealthProbe       HealthProbeConfig `json:"healthProbe"`
	LaunchConcurrency int               `json:"launchConcurrency"`
	Client            kubeClientFlags   `json:"client"`
	Pod               podFlags          `json:"pod"`
	Grace             graceFlags        `json:"grace"`
	Pools             poolFlags         `json:"pools"`
	Batch             batchFlags        `json:"batch"`
}

// HealthProbeConfig is the node health check pods.
type HealthProbeConfig struct {
	Image       string            `json:"image"`
	Annotations map[string]string `json:"annotations"`
}

// Duration is a time.Duration written as Go writes one ("90s", "1h30m") in the file.
type Duration time.Duration

// UnmarshalJSON reads "90s" (decodeConfig has checked the value and named its field).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// MarshalJSON writes "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

var durationType = reflect.TypeFor[Duration]()

// configField is where one flag lands in Config, and the variable that sets it.
type configField struct {
	flag, path, env string
}

// configFields maps every flag of `dlc server` and `dlc worker` (but --config) onto its
// field of Config; TestEveryFlagIsAConfigField checks it both ways.
var configFields = []configField{
	{"temporal", "temporal.address", "DLC_TEMPORAL_ADDRESS"},
	{"namespace", "temporal.namespace", "DLC_TEMPORAL_NAMESPACE"},
	{"temporal-tls-cert", "temporal.tls.cert", "DLC_TEMPORAL_TLS_CERT"},
	{"temporal-tls-key", "temporal.tls.key", "DLC_TEMPORAL_TLS_KEY"},
	{"temporal-tls-ca", "temporal.tls.ca", "DLC_TEMPORAL_TLS_CA"},
	{"temporal-tls-server-name", "temporal.tls.serverName", "DLC_TEMPORAL_TLS_SERVER_NAME"},
	{"nats", "nats.url", "DLC_NATS_URL"},
	{"nats-creds", "nats.creds", "DLC_NATS_CREDS"},
	{"nats-stream-replicas", "nats.streamReplicas", envStreamReplicas},
	{"nats-tls-ca", "nats.tls.ca", "DLC_NATS_CA"},
	{"nats-tls-cert", "nats.tls.cert", "DLC_NATS_TLS_CERT"},
	{"nats-tls-key", "nats.tls.key", "DLC_NATS_TLS_KEY"},
	{"storage-root", "storage.root", "DLC_STORAGE_ROOT"},
	{"log-archive-root", "storage.logArchive.root", "DLC_LOG_ARCHIVE_ROOT"},
	{"log-archive-retention", "storage.logArchive.retention", ""},
	{"metrics-addr", "metrics.addr", "DLC_METRICS_ADDR"},
	{"runs-database", "runs.database", "DLC_RUNS_DATABASE"},
	{"runs-retention", "runs.retention", ""},
	{"verbose", "log.verbose", ""},

	{"addr", "api.addr", ""},
	{"admin-token-file", "api.adminTokenFile", "DLC_ADMIN_TOKEN_FILE"},
	{"tls-cert", "api.tls.cert", "DLC_TLS_CERT"},
	{"tls-key", "api.tls.key", "DLC_TLS_KEY"},

	{"secrets-dir", "secrets.dir", "DLC_SECRETS_DIR"},
	{"webhook-allow", "notifications.webhookAllow", ""},
	{"console-url", "notifications.consoleURL", "DLC_CONSOLE_URL"},

	{"heartbeat-budget", "worker.heartbeatBudget", ""},
	{"resource-interval", "worker.resourceInterval", ""},
	{"long-heartbeat-timeout", "worker.longHeartbeatTimeout", ""},
	{"state-dir", "worker.local.stateDir", ""},
	{"workdir", "worker.local.workDir", ""},
	{"gpus", "worker.local.gpus", ""},
	{"local-sandbox", "worker.local.sandbox", "DLC_LOCAL_SANDBOX"},
	{"kubeconfig", "worker.kubernetes.kubeconfig", ""},
	{"kube-namespace", "worker.kubernetes.namespaces", ""},
	{"namespace-prefix", "worker.kubernetes.namespacePrefix", ""},
	{"s3-secret", "worker.kubernetes.s3Secret", ""},
	{"pod-s3-endpoint", "worker.kubernetes.podS3Endpoint", ""},
	{"pod-annotation", "worker.kubernetes.podAnnotations", ""},
	{"health-checks", "worker.kubernetes.healthChecks", ""},
	{"node-stats", "worker.kubernetes.nodeStats", ""},
	{"dcgm-exporter-port", "worker.kubernetes.dcgmExporterPort", ""},
	{"health-probe-image", "worker.kubernetes.healthProbe.image", ""},
	{"health-probe-annotation", "worker.kubernetes.healthProbe.annotations", ""},
	{"launch-concurrency", "worker.kubernetes.launchConcurrency", ""},
	{"kube-qps", "worker.kubernetes.client.qps", ""},
	{"kube-burst", "worker.kubernetes.client.burst", ""},
	{"image-pull-secret", "worker.kubernetes.pod.imagePullSecrets", ""},
	{"service-account", "worker.kubernetes.pod.serviceAccount", ""},
	{"shm-size", "worker.kubernetes.pod.shmSize", ""},
	{"run-as-user", "worker.kubernetes.pod.runAsUser", ""},
	{"image-pull-grace", "worker.kubernetes.grace.imagePull", ""},
	{"node-lost-grace", "worker.kubernetes.grace.nodeLost", ""},
	{"stop-grace", "worker.kubernetes.grace.stop", ""},
	{"pool-selector", "worker.kubernetes.pools.selector", ""},
	{"pool-toleration", "worker.kubernetes.pools.toleration", ""},
	{"pool-priority-class", "worker.kubernetes.pools.priorityClass", ""},
	{"pool-security", "worker.kubernetes.pools.security", ""},
	{"pool-allow-host-network", "worker.kubernetes.pools.allowHostNetwork", ""},
	{"pool-allow-host-path", "worker.kubernetes.pools.allowHostPath", ""},
	{"pool-allow-resource", "worker.kubernetes.pools.allowResource", ""},
	{"pool-service-account", "worker.kubernetes.pools.serviceAccount", ""},
	{"pool-image-pull-secret", "worker.kubernetes.pools.imagePullSecret", ""},
	{"pool-placement-timeout", "worker.kubernetes.pools.placementTimeout", ""},
	{"pool-autoscaled", "worker.kubernetes.pools.autoscaled", ""},
	{"pool-gang-scheduler", "worker.kubernetes.batch.gangScheduler", ""},
	{"pool-scheduler-name", "worker.kubernetes.batch.schedulerName", ""},
	{"pool-queue", "worker.kubernetes.batch.queue", ""},
}

// fieldOfFlag is the configField of a flag.
func fieldOfFlag(flag string) (configField, bool) {
	i := slices.IndexFunc(configFields, func(f configField) bool { return f.flag == flag })
	if i < 0 {
		return configField{}, false
	}
	return configFields[i], true
}

// serverCommand, workerCommand and notifierCommand select the flags a command binds
// (bindConfigFlags); bothCommands binds them all.
const (
	serverCommand   = "server"
	workerCommand   = "worker"
	notifierCommand = "notifier"
	bothCommands    = ""
)

// bindConfigFlags adds the flags of command (serverCommand or workerCommand) to fs,
// each bound to its field of c with its default.
func bindConfigFlags(fs *pflag.FlagSet, c *Config, command string) {
	fs.StringVar(&c.Temporal.Address, "temporal", "127.0.0.1:7233", "Temporal frontend host:port")
	fs.StringVar(&c.Storage.Root, "storage-root", "", storageRootUsage)
	fs.StringVar(&c.Storage.LogArchive.Root, "log-archive-root", "", logArchiveRootUsage)
	fs.DurationVar((*time.Duration)(&c.Storage.LogArchive.Retention), "log-archive-retention", 0, logArchiveRetentionUsage)
	fs.StringVar(&c.Temporal.Namespace, "namespace", "default", "Temporal namespace")
	fs.StringVar(&c.NATS.URL, "nats", "nats://127.0.0.1:4222", "NATS URL (a cluster's servers: comma-separated URLs)")
	registerStreamReplicas(fs, &c.NATS.StreamReplicas)
	fs.StringVar(&c.NATS.Creds, "nats-creds", "", "NATS credentials file (or DLC_NATS_USER / DLC_NATS_PASSWORD)")
	fs.StringVar(&c.NATS.TLS.CA, "nats-tls-ca", "", "CA certificate file for NATS over TLS")
	fs.StringVar(&c.NATS.TLS.Cert, "nats-tls-cert", "", "client certificate for NATS over mutual TLS")
	fs.StringVar(&c.NATS.TLS.Key, "nats-tls-key", "", "key of --nats-tls-cert")
	fs.StringVar(&c.Temporal.TLS.Cert, "temporal-tls-cert", "", "client certificate for Temporal over mutual TLS")
	fs.StringVar(&c.Temporal.TLS.Key, "temporal-tls-key", "", "key of --temporal-tls-cert")
	fs.StringVar(&c.Temporal.TLS.CA, "temporal-tls-ca", "", "CA certificate of the Temporal frontend (default: the system's roots)")
	fs.StringVar(&c.Temporal.TLS.ServerName, "temporal-tls-server-name", "", "name to verify the Temporal frontend's certificate against (default: the host of --temporal)")
	registerMetricsAddr(fs, &c.Metrics.Addr, "")
	if command == serverCommand || command == workerCommand || command == bothCommands {
		fs.StringVar(&c.Runs.Database, "runs-database", "", runsDatabaseUsage)
	}
	if command == serverCommand || command == bothCommands {
		fs.DurationVar((*time.Duration)(&c.Runs.Retention), "runs-retention", 0, runsRetentionUsage)
	}
	if command == serverCommand || command == notifierCommand || command == bothCommands {
		fs.StringVar(&c.Secrets.Dir, "secrets-dir", "", "read the secrets that trigger webhooks and notification rules name by reference (secretRef, botSecretRef, passwordRef) from this directory: one file WORKSPACE.NAME, or WORKSPACE.NAME.KEY for a reference with a key, as a Kubernetes Secret mounted as a volume lays them out (default: none, and such a reference fails)")
	}
	if command == notifierCommand || command == bothCommands {
		fs.StringSliceVar(&c.Notifications.WebhookAllow, "webhook-allow", nil, "let notification webhooks and SMTP servers reach these internal destinations: CIDR, IP address or host:port (repeatable, comma-separated); loopback, private, link-local, multicast and unspecified addresses are refused otherwise")
		fs.StringVar(&c.Notifications.ConsoleURL, "console-url", "", "the web console's external base URL (https://dlc.example.com), which notification messages and e-mails link to; default: no links")
	}
	if command == serverCommand || command == bothCommands {
		fs.StringVar(&c.API.Addr, "addr", embedded.DefaultAPIAddr, "listen address")
		fs.StringVar(&c.API.AdminTokenFile, "admin-token-file", "",
			"install the admin token kept in this file (generated there, mode 0600, if missing); tokens already created keep working without it")
		fs.StringVar(&c.API.TLS.Cert, "tls-cert", "", "serve HTTPS with this PEM certificate (chain)")
		fs.StringVar(&c.API.TLS.Key, "tls-key", "", "the PEM key of --tls-cert")
	}
	if command == workerCommand || command == bothCommands {
		w := &c.Worker
		k := &w.Kubernetes
		fs.StringVar(&w.Local.StateDir, "state-dir", "", "local backend state directory")
		fs.StringVar(&w.Local.WorkDir, "workdir", "", "base directory of local replicas")
		fs.BoolVar(&w.Local.Sandbox, "local-sandbox", false, "local backend: run replicas in the sandbox (root and bubblewrap): each workspace's replicas as a user of their own, with no view of the worker's credential files, state directory or environment, and no network but their gang's and the S3 endpoint's, which must be on a loopback IP (docs/security.md#local-jobs)")
		fs.IntVar(&w.Local.GPUs, "gpus", 0, "local backend: simulate an inventory of N GPUs instead of the ones nvidia-smi -L lists (give every worker on a state directory the same)")
		fs.StringVar(&k.Kubeconfig, "kubeconfig", "", "run jobs as pods on this cluster (\"in-cluster\" for the pod's service account)")
		fs.StringVar(&k.S3Secret, "s3-secret", "", "kubernetes: Secret (in each workspace namespace) whose keys become the pods' environment")
		fs.StringVar(&k.PodS3Endpoint, "pod-s3-endpoint", "", "kubernetes: "+podS3EndpointUsage+" (default: none; pods get DLC_S3_ENDPOINT and AWS_REGION as they are here)")
		fs.StringVar(&k.NamespacePrefix, "namespace-prefix", "", "kubernetes: a workspace W runs in namespace PREFIX+W")
		fs.StringToStringVar(&k.PodAnnotations, "pod-annotation", nil, "kubernetes: annotation KEY=VALUE on every pod (repeatable)")
		fs.StringArrayVar(&k.Namespaces, "kube-namespace", nil, "kubernetes: namespaced mode: run gangs only in this namespace, watch it alone, create none (repeatable; see deploy/rbac-namespaced.yaml)")
		fs.BoolVar(&k.NodeStats, "node-stats", false, "kubernetes: sample replicas' CPU and memory from their nodes' kubelet statistics (needs get on nodes/proxy: deploy/rbac-node-stats.yaml; docs/metrics.md)")
		fs.IntVar(&k.DCGMExporterPort, "dcgm-exporter-port", 0, "kubernetes, with --node-stats: read replicas' GPUs from the DCGM exporter on this port of their node (9400 by default there; 0: none)")
		fs.BoolVar(&k.HealthChecks, "health-checks", true, "kubernetes: node health checks (pre-flight checks, quarantine and re-checks; off, the worker needs no patch on nodes)")
		fs.StringVar(&k.HealthProbe.Image, "health-probe-image", "", "kubernetes: image of the node health check pods (default "+kube.DefaultHealthProbeImage+")")
		fs.StringToStringVar(&k.HealthProbe.Annotations, "health-probe-annotation", nil, "kubernetes: annotation KEY=VALUE on every node health check pod (repeatable)")
		k.Pools.register(fs, "kubernetes: ", " (quota, public, spot, idle)")
		k.Batch.register(fs, "kubernetes: ")
		k.Pod.register(fs)
		k.Grace.register(fs)
		registerHeartbeatBudget(fs, &w.HeartbeatBudget)
		registerResourceInterval(fs, (*time.Duration)(&w.ResourceInterval))
		registerLongHeartbeatTimeout(fs, (*time.Duration)(&w.LongHeartbeatTimeout))
		registerLaunchConcurrency(fs, &k.LaunchConcurrency)
		k.Client.register(fs)
	}
	fs.BoolVarP(&c.Log.Verbose, "verbose", "v", false, "log at info level")
	// The variables that set a flag, in its help.
	fs.VisitAll(func(f *pflag.Flag) {
		if cf, ok := fieldOfFlag(f.Name); ok && cf.env != "" && !strings.Contains(f.Usage, "$"+cf.env) {
			f.Usage += " ($" + cf.env + ")"
		}
	})
}

// defaultConfig is the configuration with no file, variable or flag: every section's
// defaults, whichever command reads it.
func defaultConfig() Config {
	var c Config
	bindConfigFlags(pflag.NewFlagSet("defaults", pflag.ContinueOnError), &c, bothCommands)
	return c
}

// decodeConfig reads a config file onto c strictly: an unknown field, a key set twice,
// a value of the wrong type or a bad duration is an error naming its field
// (schemas.ErrorList).
func decodeConfig(data []byte, c *Config) error {
	jsonData, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	if len(bytes.TrimSpace(jsonData)) == 0 || string(bytes.TrimSpace(jsonData)) == "null" {
		return nil
	}
	var doc any
	if err := json.Unmarshal(jsonData, &doc); err != nil {
		return fmt.Errorf("not YAML: %w", err)
	}
	var errs schemas.ErrorList
	var root yamlv3.Node
	if err := yamlv3.Unmarshal(data, &root); err == nil {
		duplicateKeys(&root, "", &errs)
	}
	checkFields(doc, reflect.TypeFor[Config](), "", &errs)
	if len(errs) > 0 {
		return errs
	}
	if err := json.Unmarshal(jsonData, c); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return schemas.ErrorList{schemas.Invalid(schemas.Path(te.Field), "must be %s, not %s", typeName(te.Type), te.Value)}
		}
		return err
	}
	return nil
}

// duplicateKeys reports the keys that a mapping below n has twice, with their paths.
func duplicateKeys(n *yamlv3.Node, p schemas.Path, errs *schemas.ErrorList) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			duplicateKeys(c, p, errs)
		}
	case yamlv3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if first, ok := seen[k.Value]; ok {
				*errs = append(*errs, schemas.Invalid(p.Child(k.Value), "set twice, on lines %d and %d", first, k.Line))
			} else {
				seen[k.Value] = k.Line
			}
			duplicateKeys(n.Content[i+1], p.Child(k.Value), errs)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			duplicateKeys(c, p.Index(i), errs)
		}
	}
}

// typeName says what a field holds in the file's words.
func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

// checkFields reports the fields of v (a decoded JSON value) that t has not, and the
// durations that do not parse, with their paths.
func checkFields(v any, t reflect.Type, p schemas.Path, errs *schemas.ErrorList) {
	if v == nil {
		return
	}
	if t == durationType {
		s, ok := v.(string)
		if _, err := time.ParseDuration(s); !ok || err != nil {
			*errs = append(*errs, schemas.Invalid(p, "%v is no duration; want one such as 90s, 15m or 2h", v))
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			*errs = append(*errs, schemas.Invalid(p, "must be a mapping"))
			return
		}
		fields := jsonFields(t)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			f, ok := fields[k]
			if !ok {
				*errs = append(*errs, schemas.Invalid(p.Child(k), "unknown field"))
				continue
			}
			checkFields(m[k], f.Type, p.Child(k), errs)
		}
	case reflect.Slice:
		if list, ok := v.([]any); ok {
			for i, e := range list {
				checkFields(e, t.Elem(), p.Index(i), errs)
			}
		}
	}
}

// jsonFields are the fields of struct type t by their JSON names.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			fields[name] = f
		}
	}
	return fields
}

// configValue is the field of c at path ("worker.kubernetes.client.qps"); the zero
// Value when there is none.
func configValue(c *Config, path string) reflect.Value {
	v := reflect.ValueOf(c).Elem()
	for name := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}
		}
		f, ok := jsonFields(v.Type())[name]
		if !ok {
			return reflect.Value{}
		}
		v = v.FieldByIndex(f.Index)
	}
	return v
}

// Validate returns every problem of the configuration, each naming its field.
func (c *Config) Validate() schemas.ErrorList {
	var errs schemas.ErrorList
	add := func(path, format string, args ...any) {
		errs = append(errs, schemas.Invalid(schemas.Path(path), format, args...))
	}
	required := func(path, value string) {
		if value == "" {
			errs = append(errs, schemas.Required(schemas.Path(path)))
		}
	}
	together := func(a, av, b, bv string) {
		if av == "" && bv != "" {
			add(a, "required with %s", b)
		}
		if bv == "" && av != "" {
			add(b, "required with %s", a)
		}
	}
	required("temporal.address", c.Temporal.Address)
	required("nats.url", c.NATS.URL)
	together("temporal.tls.cert", c.Temporal.TLS.Cert, "temporal.tls.key", c.Temporal.TLS.Key)
	together("api.tls.cert", c.API.TLS.Cert, "api.tls.key", c.API.TLS.Key)
	if n := c.NATS.StreamReplicas; n < 0 || n > jetstream.MaxReplicas {
		add("nats.streamReplicas", "%d: must be 1 to %d (0: keep what the streams have)", n, jetstream.MaxReplicas)
	}
	if c.Runs.Retention < 0 {
		add("runs.retention", "%s is negative", time.Duration(c.Runs.Retention))
	}
	if c.Runs.Retention > 0 && c.Runs.Database == "" {
		add("runs.retention", "set without runs.database")
	}
	if c.Storage.LogArchive.Retention < 0 {
		add("storage.logArchive.retention", "%s is negative", time.Duration(c.Storage.LogArchive.Retention))
	}
	w := &c.Worker
	if d := time.Duration(w.ResourceInterval); d > 0 && d < activities.MinResourceInterval {
		add("worker.resourceInterval", "%s is shorter than %s; want how often to sample each replica's resources, e.g. %s (negative: never)", d, activities.MinResourceInterval, activities.DefaultResourceInterval)
	}
	if !(w.HeartbeatBudget > 0) {
		add("worker.heartbeatBudget", "%g is not positive; want heartbeats per second, e.g. %d", w.HeartbeatBudget, activities.DefaultHeartbeatBudget)
	}
	if d := time.Duration(w.LongHeartbeatTimeout); d < workflows.MinLongHeartbeatTimeout {
		add("worker.longHeartbeatTimeout", "%s is below the minimum %s", d, workflows.MinLongHeartbeatTimeout)
	}
	if w.Local.GPUs < 0 {
		add("worker.local.gpus", "%d is negative; want the number of GPUs to simulate", w.Local.GPUs)
	}
	k := &w.Kubernetes
	if w.Local.Sandbox {
		if k.Kubeconfig != "" {
			add("worker.local.sandbox", "only the local backend has a sandbox, pods run without it: drop it or --kubeconfig (worker.kubernetes.kubeconfig)")
		} else if err := sandboxAvailable(); err != nil {
			add("worker.local.sandbox", "this host cannot give it: %v", err)
		}
	}
	if e := k.PodS3Endpoint; e != "" {
		if k.Kubeconfig == "" {
			add("worker.kubernetes.podS3Endpoint", "%q: only pods use it; add --kubeconfig (worker.kubernetes.kubeconfig)", e)
		} else if u, err := url.Parse(e); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			add("worker.kubernetes.podS3Endpoint", "%q: want an http:// or https:// URL with a host and no path, such as http://s3.storage.svc:9000", e)
		}
	}
	if k.LaunchConcurrency < 1 {
		add("worker.kubernetes.launchConcurrency", "%d is less than 1; want how many jobs launch at once, e.g. %d", k.LaunchConcurrency, kube.DefaultLaunchConcurrency)
	}
	if !(k.Client.QPS > 0) {
		add("worker.kubernetes.client.qps", "%g is not positive; want requests a second, e.g. %d", k.Client.QPS, kube.DefaultClientQPS)
	}
	if k.Client.Burst < 1 {
		add("worker.kubernetes.client.burst", "%d is less than 1; want how many requests may go at once, e.g. %d", k.Client.Burst, kube.DefaultClientBurst)
	}
	if _, err := resource.ParseQuantity(k.Pod.ShmSize); err != nil {
		add("worker.kubernetes.pod.shmSize", "%q: %v", k.Pod.ShmSize, err)
	}
	if k.Grace.ImagePull < 0 {
		add("worker.kubernetes.grace.imagePull", "%s is negative", time.Duration(k.Grace.ImagePull))
	}
	if k.Grace.NodeLost < 0 {
		add("worker.kubernetes.grace.nodeLost", "%s is negative", time.Duration(k.Grace.NodeLost))
	}
	if k.Grace.Stop < 0 {
		add("worker.kubernetes.grace.stop", "%s is negative", time.Duration(k.Grace.Stop))
	}
	if _, err := k.Pools.configs(); err != nil {
		errs = append(errs, flagError(err))
	}
	if _, err := k.Batch.configs(); err != nil {
		errs = append(errs, flagError(err))
	}
	return errs
}

// sandboxAvailable says why the local backend's sandbox cannot run here
// (local.SandboxAvailable); tests replace it.
var sandboxAvailable = local.SandboxAvailable

// flagError is an error of the pool parsers, `--pool-x "value": detail`, as the field
// error of the flag's field.
func flagError(err error) *schemas.FieldError {
	msg := err.Error()
	name, rest, _ := strings.Cut(strings.TrimPrefix(msg, "--"), " ")
	if cf, ok := fieldOfFlag(name); ok && strings.HasPrefix(msg, "--") {
		return schemas.Invalid(schemas.Path(cf.path), "%s", rest)
	}
	return schemas.Invalid("", "%s", msg)
}

// configOptions is what `dlc server` and `dlc worker` share: the --config file, the
// flags bound to Config, and where each field's value came from.
type configOptions struct {
	command    string
	configFile string
	Config     Config
	// source names the flag ("--temporal") or variable ("$DLC_TEMPORAL_ADDRESS") that
	// set a field, by path; fields from the file or the defaults have none.
	source map[string]string
}

func (o *configOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.configFile, "config", "", "YAML configuration file (docs/configuration.md); the DLC_* variables override it, the flags override both")
	bindConfigFlags(fs, &o.Config, o.command)
}

// Complete merges, from lowest precedence to highest, the defaults, the --config file,
// the DLC_* variables and the flags given on the command line into o.Config.
func (o *configOptions) Complete(fs *pflag.FlagSet) error {
	var merged Config
	defaults := pflag.NewFlagSet(o.command, pflag.ContinueOnError)
	bindConfigFlags(defaults, &merged, bothCommands)
	if o.configFile != "" {
		data, err := os.ReadFile(o.configFile)
		if err != nil {
			return fmt.Errorf("--config: %w", err)
		}
		if err := decodeConfig(data, &merged); err != nil {
			return fmt.Errorf("%s: %w", o.configFile, err)
		}
	}
	o.source = map[string]string{}
	for _, cf := range configFields {
		if fs.Lookup(cf.flag) == nil {
			continue // another command's
		}
		if v := os.Getenv(cf.env); cf.env != "" && v != "" {
			if err := defaults.Set(cf.flag, v); err != nil {
				return fmt.Errorf("%s: %w", cf.env, err)
			}
			o.source[cf.path] = "$" + cf.env
		}
		if f := fs.Lookup(cf.flag); f != nil && f.Changed {
			configValue(&merged, cf.path).Set(configValue(&o.Config, cf.path))
			o.source[cf.path] = "--" + cf.flag
		}
	}
	o.Config = merged
	return nil
}

// prepare completes the configuration from the command's flags and validates it: what
// `dlc server` and `dlc worker` do before they run.
func (o *configOptions) prepare(cmd *cobra.Command) error {
	if err := o.Complete(cmd.Flags()); err != nil {
		return err
	}
	return o.Validate()
}

// Validate checks the merged configuration; a problem is named by the flag or variable
// that set the field, else by the field's path.
func (o *configOptions) Validate() error {
	errs := o.Config.Validate()
	if len(errs) == 0 {
		return nil
	}
	for i, e := range errs {
		field, detail := e.Field, e.Detail
		if src, ok := o.source[field]; ok {
			field = src
		}
		// "required with temporal.tls.cert" names the flag that set it.
		if with, ok := strings.CutPrefix(detail, "required with "); ok {
			if src, ok := o.source[with]; ok {
				detail = "required with " + src
			}
		}
		errs[i] = &schemas.FieldError{Field: field, Detail: detail}
	}
	return errs
}

// natsOptions are the connection options of the NATS fields and the environment: a
// credentials file, or user and password from DLC_NATS_USER and DLC_NATS_PASSWORD (never
// from flags, which other users can read in the process list), and TLS.
func (c *Config) natsOptions() []nats.Option {
	var opts []nats.Option
	if c.NATS.Creds != "" {
		opts = append(opts, nats.UserCredentials(c.NATS.Creds))
	}
	if u := os.Getenv("DLC_NATS_USER"); u != "" {
		opts = append(opts, nats.UserInfo(u, os.Getenv("DLC_NATS_PASSWORD")))
	}
	if c.NATS.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(c.NATS.TLS.CA))
	}
	if c.NATS.TLS.Cert != "" || c.NATS.TLS.Key != "" {
		opts = append(opts, nats.ClientCert(c.NATS.TLS.Cert, c.NATS.TLS.Key))
	}
	return opts
}

// temporalTLS is the TLS configuration of the Temporal connection; nil (plain text)
// when no TLS field is set. Validate has checked that cert and key go together.
func (c *Config) temporalTLS() (*tls.Config, error) {
	t := c.Temporal.TLS
	if t == (TemporalTLSConfig{}) {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("temporal client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("temporal CA: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal CA: %s holds no PEM certificate", t.CA)
		}
	}
	return cfg, nil
}

// appConfig is the process's app.Config with the connections, storage, log archive and
// metrics; the command switches its parts on.
func (c *Config) appConfig() (app.Config, error) {
	temporalTLS, err := c.temporalTLS()
	if err != nil {
		return app.Config{}, err
	}
	streams, err := streamReplicasOption(c.NATS.StreamReplicas)
	if err != nil {
		return app.Config{}, err
	}
	return app.Config{
		TemporalAddress: c.Temporal.Address, Namespace: c.Temporal.Namespace, TemporalTLS: temporalTLS,
		NATSURL: c.NATS.URL, NATSOptions: c.natsOptions(), Logger: newLogger(c.Log.Verbose),
		StorageRoot: c.Storage.Root, Streams: streams,
		LogArchive: app.LogArchiveConfig{Root: c.Storage.LogArchive.Root, Retention: time.Duration(c.Storage.LogArchive.Retention)},
		Runs:       app.RunsConfig{Database: c.Runs.Database, Retention: time.Duration(c.Runs.Retention)},
		Metrics:    metricsConfig(c.Metrics.Addr),
		Secrets:    secretsSource(c.Secrets.Dir),
	}, nil
}

// secretsSource is the source of the secrets named by reference: dir's files, or none.
func secretsSource(dir string) notify.SecretSource {
	if dir == "" {
		return nil
	}
	return notify.DirSecrets(dir)
}
