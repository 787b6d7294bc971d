// Package tools builds the external programs OpenDLC runs (the Temporal dev
// server, the versitygw S3 gateway, workflowcheck, golangci-lint, helm, and the
// Kubernetes test control plane: etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager and kwok) from pinned Go module versions and caches
// the binaries by version, so every developer and every test run uses exactly
// the same build without a separate install step.
//
// Most tools are built with `go install package@version`. The Kubernetes
// control plane cannot be: k8s.io/kubernetes refers to its staging modules
// through local replace directives, which go install refuses. Those tools are
// built from a nested module in the OpenDLC source tree (Tool.Module,
// tools/kube) that pins k8s.io/kubernetes and replaces each staging module
// with its published twin; they are cached under a version that includes a
// hash of that module's go.mod, go.sum and Go files, so a version bump
// rebuilds them once.
package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// ErrUnknownTool is returned by Ensure for a name that is not in the pinned table.
var ErrUnknownTool = errors.New("tools: unknown tool")

// EnvDir names the environment variable that overrides the cache directory.
const EnvDir = "OPENDLC_TOOLS_DIR"

// Tool is one pinned program: the Go package that provides its main and the
// module version it is built at.
type Tool struct {
	// Name is the binary name and the key passed to Ensure, e.g. "temporal".
	Name string
	// Package is the import path of the main package, e.g. "github.com/temporalio/cli/cmd/temporal".
	Package string
	// Version is the module version given to go install, e.g. "v1.5.1". For a
	// tool built from a Module, the table holds the version of the module that
	// provides Package, and Lookup and List append "+src.<hash>" of the Module's
	// sources, which is what the cache is keyed by.
	Version string
	// Module, when set, is the directory (relative to the root of the OpenDLC
	// source tree, slash-separated) of the nested Go module that pins the
	// tool's dependencies. Every tool with the same Module is built by one
	// `go build` in that directory, under one lock, so they share compilation.
	Module string
	// LDFlags are passed to the go command's -ldflags. A Module build joins the
	// distinct LDFlags of all its tools.
	LDFlags string
	// Group names a set of tools installed together, e.g. "kube" for the
	// Kubernetes test control plane; see Expand.
	Group string
	// Bin is the file name go install gives the binary (the last element of
	// Package) when it differs from Name: the cache keeps it under Name.
	Bin string

	// srcDir is the absolute path of Module, set by resolve.
	srcDir string
}

// String returns the argument given to go install, package@version.
func (t Tool) String() string { return t.Package + "@" + t.Version }

// Path returns where the tool's binary lives (or will live) in the cache
// directory dir: <dir>/<name>@<version>/<name>.
func (t Tool) Path(dir string) string {
	return filepath.Join(dir, t.Name+"@"+t.Version, t.binaryName())
}

func (t Tool) binaryName() string { return exe(t.Name) }

// builtName is the file name of the binary go install writes.
func (t Tool) builtName() string {
	if t.Bin != "" {
		return exe(t.Bin)
	}
	return t.binaryName()
}

func exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

// Versions of the Kubernetes control plane built from the tools/kube module.
// They must agree with tools/kube/go.mod (a test checks).
const (
	kubeVersion = "v1.36.3" // k8s.io/kubernetes
	etcdVersion = "v3.6.8"  // go.etcd.io/etcd/server/v3, as k8s.io/kubernetes v1.36.3 requires
	kubeModule  = "tools/kube"
	kubeGroup   = "kube"
	// realNodeGroup is what kubestack's real nodes need beyond the kube group.
	realNodeGroup = "realnode"
)

// kubeLDFlags stamps the Kubernetes version into the binaries, as the
// project's own release build does (otherwise they report v0.0.0-master),
// and drops the symbol tables to shorten the link.
func kubeLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	const pkg = "k8s.io/component-base/version"
	return fmt.Sprintf("-s -w -X %[1]s.gitVersion=%[2]s -X %[1]s.gitMajor=%[3]s -X %[1]s.gitMinor=%[4]s -X %[1]s.gitTreeState=clean",
		pkg, version, major, minor)
}

// temporalServerVersion is go.temporal.io/server's, as github.com/temporalio/cli v1.5.1
// requires it; sources serves its schema files.
const temporalServerVersion = "v1.29.1"

// helmVersion is helm's; its k8s.io modules are v0.36 (Kubernetes 1.36).
const helmVersion = "v3.21.4"

// helmLDFlags stamps what helm's own release build does: its version, and the
// Kubernetes version of its k8s.io modules, which helm template and helm lint assume
// for the cluster (otherwise v1.20, which a chart's kubeVersion may refuse).
func helmLDFlags(version, kubeMajor, kubeMinor string) string {
	flags := []string{"-s", "-w",
		"-X helm.sh/helm/v3/internal/version.version=" + version,
		"-X helm.sh/helm/v3/internal/version.gitTreeState=clean"}
	for _, pkg := range []string{"helm.sh/helm/v3/pkg/chartutil", "helm.sh/helm/v3/pkg/lint/rules"} {
		flags = append(flags, "-X "+pkg+".k8sVersionMajor="+kubeMajor, "-X "+pkg+".k8sVersionMinor="+kubeMinor)
	}
	return strings.Join(flags, " ")
}

// pinned is the table of tools; change a version here and every caller
// rebuilds it once, into a new cache entry.
var pinned = []Tool{
	{Name: "temporal", Package: "github.com/temporalio/cli/cmd/temporal", Version: "v1.5.1"},
	{Name: "versitygw", Package: "github.com/versity/versitygw/cmd/versitygw", Version: "v1.8.0"},
	// The NATS server, as a program: the devstack runs it in-process from the library
	// (the version in go.mod); the install test's NATS image (images.Component) runs
	// this binary, built from the same module version.
	{Name: "nats-server", Package: "github.com/nats-io/nats-server/v2", Version: "v2.15.2"},
	{Name: "workflowcheck", Package: "go.temporal.io/sdk/contrib/tools/workflowcheck", Version: "v0.6.0"},
	// golangci-lint reads its version from the module's build info, so go
	// install stamps it without ldflags; the linters it runs come with it.
	{Name: "golangci-lint", Package: "github.com/golangci/golangci-lint/v2/cmd/golangci-lint", Version: "v2.15.0"},
	{Name: "etcd", Package: "github.com/opendlc/opendlc/tools/kube/etcd", Version: etcdVersion,
		Module: kubeModule, Group: kubeGroup},
	{Name: "kube-apiserver", Package: "k8s.io/kubernetes/cmd/kube-apiserver", Version: kubeVersion,
		Module: kubeModule, Group: kubeGroup, LDFlags: kubeLDFlags(kubeVersion)},
	{Name: "kube-controller-manager", Package: "k8s.io/kubernetes/cmd/kube-controller-manager", Version: kubeVersion,
		Module: kubeModule, Group: kubeGroup, LDFlags: kubeLDFlags(kubeVersion)},
	{Name: "kube-scheduler", Package: "k8s.io/kubernetes/cmd/kube-scheduler", Version: kubeVersion,
		Module: kubeModule, Group: kubeGroup, LDFlags: kubeLDFlags(kubeVersion)},
	// kubectl, for the installation test's steps of docs/production.md.
	{Name: "kubectl", Package: "k8s.io/kubernetes/cmd/kubectl", Version: kubeVersion,
		Module: kubeModule, Group: kubeGroup, LDFlags: kubeLDFlags(kubeVersion)},
	// The kubelet of kubestack's real nodes (containers under containerd and runc from
	// Debian's packages), built with the control plane so the versions agree.
	{Name: "kubelet", Package: "k8s.io/kubernetes/cmd/kubelet", Version: kubeVersion,
		Module: kubeModule, Group: kubeGroup, LDFlags: kubeLDFlags(kubeVersion)},
	// kwok has no local replaces, so go install builds it in its own module graph.
	{Name: "kwok", Package: "sigs.k8s.io/kwok/cmd/kwok", Version: "v0.8.0", Group: kubeGroup},
	// The real nodes' cluster DNS (CoreDNS with its kubernetes plugin, tools/coredns)
	// and image registry (the CNCF distribution registry), kubestack's "realnode" group.
	{Name: "coredns", Package: "github.com/opendlc/opendlc/tools/coredns", Version: "v1.15.0",
		Module: "tools/coredns", Group: realNodeGroup, LDFlags: "-s -w"},
	{Name: "registry", Package: "github.com/distribution/distribution/v3/cmd/registry", Version: "v3.1.2",
		Group: realNodeGroup, LDFlags: "-s -w"},
	// The Temporal server (not the dev server: every service, on PostgreSQL) and its SQL
	// schema tool, for the production topology test (integration/topology,
	// devstack.StartTemporalServer); the server version the temporal CLI above embeds.
	// The schema files come from the same module (ModuleDir).
	{Name: "temporal-server", Package: "go.temporal.io/server/cmd/server", Version: temporalServerVersion, Bin: "server"},
	{Name: "temporal-sql-tool", Package: "go.temporal.io/server/cmd/tools/sql", Version: temporalServerVersion, Bin: "sql"},
	// Helm, for the chart's lint, template and apply tests (deploy/helm). v3.21 is the
	// line built on the k8s.io v0.36 modules, as OpenDLC's own; go install builds it in
	// its own module graph (no local replaces).
	{Name: "helm", Package: "helm.sh/helm/v3/cmd/helm", Version: helmVersion, LDFlags: helmLDFlags(helmVersion, "1", "36")},
	// kube-scheduler with scheduler-plugins' Coscheduling plugin, kubestack's optional
	// second scheduler (sources.go).
	{Name: "coscheduler", Package: "github.com/opendlc/opendlc/tools/schedplugins/coscheduler", Version: schedPluginsVersion,
		Module: schedPluginsModule, Group: batchGroup, LDFlags: kubeLDFlags(schedPluginsKubeVersion)},
}

// List returns the pinned tools, in a stable order. The versions of tools
// built from a Module carry the hash of its sources when the source tree can
// be found (see Lookup).
func List() []Tool {
	out := slices.Clone(pinned)
	for i := range out {
		if t, err := resolve(out[i]); err == nil {
			out[i] = t
		}
	}
	return out
}

// Lookup returns the pinned tool called name. For a tool built from a Module
// its Version ends in "+src.<hash>" when the OpenDLC source tree is found;
// Ensure reports why when it is not.
func Lookup(name string) (Tool, bool) {
	t, ok := lookupPinned(pinned, name)
	if !ok {
		return Tool{}, false
	}
	if r, err := resolve(t); err == nil {
		t = r
	}
	return t, true
}

func lookupPinned(table []Tool, name string) (Tool, bool) {
	i := slices.IndexFunc(table, func(t Tool) bool { return t.Name == name })
	if i < 0 {
		return Tool{}, false
	}
	return table[i], true
}

// Expand replaces each group name in names (e.g. "kube") by the names of its
// tools, keeps tool names as they are, and drops repeats. A name that is
// neither is an ErrUnknownTool.
func Expand(names ...string) ([]string, error) {
	var out []string
	for _, name := range names {
		var members []string
		for _, t := range pinned {
			if t.Name == name || (t.Group != "" && t.Group == name) {
				members = append(members, t.Name)
			}
		}
		if len(members) == 0 {
			return nil, fmt.Errorf("%w %q", ErrUnknownTool, name)
		}
		for _, m := range members {
			if !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// Dir returns the cache directory: $OPENDLC_TOOLS_DIR when set, otherwise
// opendlc/tools under the user's cache directory.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "opendlc", "tools")
}

// Ensure returns the path of the named tool's binary, building it with
// `go install` first when the cache does not hold it yet. It is safe to call
// from many processes at once: one builds while the others wait on a file
// lock, and nobody ever sees a partly written binary.
//
// The tools of one Module (the Kubernetes control plane) are built together:
// asking for any of them builds and caches all of them, which takes about ten
// minutes on two cores the first time.
func Ensure(ctx context.Context, name string) (string, error) {
	t, ok := lookupPinned(pinned, name)
	if !ok {
		return "", fmt.Errorf("%w %q", ErrUnknownTool, name)
	}
	t, err := resolve(t)
	if err != nil {
		return "", err
	}
	return installer{dir: Dir(), build: goInstall, buildModule: goBuildModule}.ensure(ctx, t)
}

// installer holds what ensure needs, so tests can swap the build steps.
type installer struct {
	dir string
	// build installs t into the empty directory gobin.
	build func(ctx context.Context, t Tool, gobin string) error
	// buildModule builds every tool in ts (all from the same Module) into the
	// empty directory gobin.
	buildModule func(ctx context.Context, ts []Tool, gobin string) error
	// table is the pinned table a Module's tools are taken from; nil means pinned.
	table []Tool
}

func (in installer) ensure(ctx context.Context, t Tool) (string, error) {
	final := t.Path(in.dir)
	if isFile(final) {
		return final, nil
	}
	if err := os.MkdirAll(in.dir, 0o755); err != nil {
		return "", fmt.Errorf("tools: %w", err)
	}
	// One lock per build: per tool, or per Module for the tools built together.
	unit := t.Name + "@" + t.Version
	batch := []Tool{t}
	if t.Module != "" {
		unit = "module-" + strings.ReplaceAll(t.Module, "/", "-") + "@" + t.sourceHash()
		batch = in.siblings(t)
	}
	unlock, err := lockFile(ctx, filepath.Join(in.dir, unit+".lock"))
	if err != nil {
		return "", fmt.Errorf("tools: lock %s: %w", t.Name, err)
	}
	defer unlock()
	// Another process may have finished the build while we waited.
	if isFile(final) {
		return final, nil
	}

	tmpPrefix := ".build-" + unit + "-"
	removeStale(in.dir, tmpPrefix) // leftovers of a build that crashed; we hold the lock
	gobin, err := os.MkdirTemp(in.dir, tmpPrefix)
	if err != nil {
		return "", fmt.Errorf("tools: %w", err)
	}
	defer os.RemoveAll(gobin)

	report := progressOf(ctx)
	report(fmt.Sprintf("building %s %s from source (once; cached in %s)", t.Name, t.Version, in.dir))
	start := time.Now()
	if t.Module == "" {
		err = in.build(ctx, t, gobin)
	} else {
		err = in.buildModule(ctx, batch, gobin)
	}
	if err != nil {
		return "", err
	}
	report(fmt.Sprintf("built %s in %s", t.Name, time.Since(start).Round(time.Second)))
	for _, b := range batch {
		dst := b.Path(in.dir)
		if isFile(dst) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		if err := os.Rename(filepath.Join(gobin, b.builtName()), dst); err != nil {
			return "", fmt.Errorf("tools: install %s: %w", b.Name, err)
		}
	}
	return final, nil
}

// siblings returns every tool built from t's Module, t included, resolved
// to the same sources as t.
func (in installer) siblings(t Tool) []Tool {
	table := in.table
	if table == nil {
		table = pinned
	}
	_, suffix, _ := strings.Cut(t.Version, "+")
	var out []Tool
	for _, s := range table {
		if s.Module != t.Module {
			continue
		}
		if s.Name == t.Name {
			out = append(out, t)
			continue
		}
		s.Version += "+" + suffix
		s.srcDir = t.srcDir
		out = append(out, s)
	}
	return out
}

// goInstall runs `go install package@version` with GOBIN=gobin. The build
// output is kept quiet unless the build fails.
func goInstall(ctx context.Context, t Tool, gobin string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("tools: building %s needs the go command: %w", t.Name, err)
	}
	// Static (CGO off) and with trimmed paths: the same compilation as the component
	// images' static builds of these tools (images.Component), so that those reuse
	// this build's packages from the Go build cache and only link. No tool of the
	// table needs the C library.
	args := []string{"install", "-trimpath"}
	report := progressOf(ctx)
	if _, ok := ctx.Value(progressKey{}).(func(string)); ok {
		args = append(args, "-v") // names each package compiled: the progress
	}
	if t.LDFlags != "" {
		args = append(args, "-ldflags", t.LDFlags)
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, t.String())...)
	cmd.Dir = gobin // outside any module or workspace of the caller
	// The binary must run here, whatever GOOS/GOARCH the caller exported.
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	var out buildOutput
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go reportWhile(t.Name, start, &out, report, stop)
	if err := cmd.Run(); err != nil {
		os.Stderr.WriteString(out.String())
		return fmt.Errorf("tools: go install %s failed after %s: %w\n%s",
			t, time.Since(start).Round(time.Second), err, lastLines(out.String(), 15))
	}
	return nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}

func removeStale(dir, prefix string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Lock takes an exclusive file lock on path (created if missing), waiting until it is
// free or ctx ends; the lock is released by the returned func, or by the kernel when the
// process dies. Other caches built beside the tools' (images) use it the same way.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	return lockFile(ctx, path)
}
