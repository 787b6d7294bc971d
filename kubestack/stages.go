package kubestack

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// stageFiles are the kwok Stage documents kwok is started with: node
// initialize and heartbeat (with leases) and the node-not-ready chaos stage,
// copied from kwok's kustomize/stage tree; the pod lifecycle from its
// "general" stages with shorter delays; and OpenDLC's own pod-complete,
// pod-fail and image-pull-error stages. Each file names its source.
//
//go:embed stages/*.yaml
var stageFiles embed.FS

// writeStages writes every stage into dir/stages.yaml as one multi-document
// file and returns its path. kwok takes only Stage documents here: a
// kustomization document in the file would stop it.
func writeStages(dir string) (string, error) {
	names, err := fs.Glob(stageFiles, "stages/*.yaml")
	if err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	var buf bytes.Buffer
	for _, name := range names { // fs.Glob sorts
		b, err := stageFiles.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("kubestack: %w", err)
		}
		fmt.Fprintf(&buf, "---\n# kubestack/%s\n", name)
		buf.Write(bytes.TrimSpace(b))
		buf.WriteString("\n")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	path := filepath.Join(dir, "stages.yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("kubestack: %w", err)
	}
	return path, nil
}
