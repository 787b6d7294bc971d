package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Versions of scheduler-plugins, whose Coscheduling plugin the coscheduler tool
// builds from tools/schedplugins (which must require this version; a test checks),
// and of the Kubernetes it is built against there (its replaces).
const (
	schedPluginsVersion     = "v0.34.7"
	schedPluginsKubeVersion = "v1.34.4"
	schedPluginsModule      = "tools/schedplugins"
	batchGroup              = "batchsched"
)

// Source is a pinned Go module read for its files rather than built: the batch
// schedulers' CustomResourceDefinitions, which their modules ship as YAML, and the
// Temporal server's SQL schemas.
type Source struct {
	// Module is the module path, e.g. "sigs.k8s.io/kueue".
	Module string
	// Version is the module version.
	Version string
}

// sources are the modules ModuleDir serves, by module path.
var sources = map[string]Source{
	"sigs.k8s.io/scheduler-plugins": {Module: "sigs.k8s.io/scheduler-plugins", Version: schedPluginsVersion},
	"sigs.k8s.io/kueue":             {Module: "sigs.k8s.io/kueue", Version: "v0.17.0"},
	// The Temporal server's SQL schemas (schema/postgresql/v12/...), for temporal-sql-tool.
	"go.temporal.io/server": {Module: "go.temporal.io/server", Version: temporalServerVersion},
}

// ModuleDir returns the directory of the pinned version of module in the Go module
// cache, downloading (and checking against the checksum database) it first if needed:
// `go mod download -json module@version`. The directory is read-only.
func ModuleDir(ctx context.Context, module string) (string, error) {
	s, ok := sources[module]
	if !ok {
		return "", fmt.Errorf("%w %q (no pinned source module)", ErrUnknownTool, module)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("tools: reading %s needs the go command: %w", module, err)
	}
	tmp, err := os.MkdirTemp("", "opendlc-moddownload-")
	if err != nil {
		return "", fmt.Errorf("tools: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, goBin, "mod", "download", "-json", s.Module+"@"+s.Version)
	cmd.Dir = tmp // outside any module of the caller
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out.Bytes(), &info); err != nil || info.Error != "" || runErr != nil || info.Dir == "" {
		msg := strings.TrimSpace(info.Error + " " + errOut.String())
		if runErr != nil {
			return "", fmt.Errorf("tools: go mod download %s@%s: %w %s", s.Module, s.Version, runErr, msg)
		}
		return "", fmt.Errorf("tools: go mod download %s@%s: %s", s.Module, s.Version, msg)
	}
	return filepath.Clean(info.Dir), nil
}
