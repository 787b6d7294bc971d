package kubestack

// The real nodes' image stores. Each real node's containerd keeps its content store,
// its overlayfs snapshots and its metadata (containerd's root) in a directory that
// outlives the cluster, RealNodeStoreDir()/<node>, so that the next cluster's nodes find
// the images already imported and unpacked: importing the 700 MB training image into a
// node takes about a minute of the machine's two cores, checking that it is there a few
// milliseconds. Everything else a node has (containerd's state, the kubelet's
// directory, the pods' logs and network namespaces) stays under the cluster's own
// directory, as before.
//
// What keeps a kept store honest:
//
//   - A store is used again only if the cluster that used it last closed it cleanly:
//     its containers (the pods' sandboxes and containers) removed through containerd,
//     containerd stopped by SIGTERM, the mounts under it gone. Only then is the marker
//     storeClean written, and it is removed as soon as a cluster starts on the store. A
//     crashed cluster (or one whose cleanup failed) leaves no marker: the next Start
//     removes the store and imports everything again.
//   - An image is imported unless every reference its tarball names is in the store,
//     unpacked, with the same image configuration (the digest the tarball's
//     manifest.json names): a changed image is imported, whatever its tag.
//   - Before the kubelet starts, every image is removed from the store except those of
//     the tarballs imported into it whose files still exist (the images package keeps
//     one build of each image): an image pulled from a registry by an earlier cluster
//     is never found on a node by a later one, and the store does not grow with every
//     training image built.
//
// Clusters with real nodes never run two at a time on a machine (the lock under /run),
// so a store has one user at a time.

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/opendlc/opendlc/internal/tools"
)

// EnvRealNodeStore names the environment variable that overrides RealNodeStoreDir.
const EnvRealNodeStore = "OPENDLC_REALNODE_STORE"

// storeClean is the marker of a store its last cluster closed cleanly.
const storeClean = "clean"

// storeImports records, in a store, the tarballs imported into it and the references
// each holds (storeRecord as JSON).
const storeImports = "imports.json"

// storeRecord maps a tarball's path to the image references it holds.
type storeRecord map[string][]string

// RealNodeStoreDir is where the real nodes' containerd roots are kept between
// clusters: $OPENDLC_REALNODE_STORE, or realnodes beside the tools' cache
// (~/.cache/opendlc/realnodes).
func RealNodeStoreDir() string {
	if d := os.Getenv(EnvRealNodeStore); d != "" {
		return d
	}
	return filepath.Join(filepath.Dir(tools.Dir()), "realnodes")
}

// storeDir is the node's kept directory; its containerd root is storeDir/root.
func (n *realNode) storeDir() string { return filepath.Join(RealNodeStoreDir(), n.name) }

func (n *realNode) storeRoot() string { return filepath.Join(n.storeDir(), "root") }

// openStore readies the node's kept store before its containerd starts: a store
// without the clean marker is removed (its last cluster crashed, or never closed it
// cleanly), the marker of a clean one is removed (it is this cluster's now), and the
// CRI's per-pod files of the last cluster go. It reports whether the store was kept.
func (n *realNode) openStore() (kept bool, err error) {
	dir := n.storeDir()
	// Nothing may stay mounted under a store that is removed or reused (a pod's /dev/shm
	// lives under containerd's root).
	if err := unmountUnder(dir); err != nil {
		return false, fmt.Errorf("kubestack: %s: %w", n.name, err)
	}
	_, statErr := os.Stat(filepath.Join(dir, storeClean))
	kept = statErr == nil
	if !kept {
		if err := os.RemoveAll(dir); err != nil {
			return false, fmt.Errorf("kubestack: %s: removing its store: %w", n.name, err)
		}
	}
	if err := os.Remove(filepath.Join(dir, storeClean)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("kubestack: %w", err)
	}
	// The CRI plugin's directories of the last cluster's sandboxes and containers (all
	// of which were removed before the store was marked clean).
	if err := os.RemoveAll(filepath.Join(n.storeRoot(), "io.containerd.grpc.v1.cri")); err != nil {
		return false, fmt.Errorf("kubestack: %w", err)
	}
	if err := os.MkdirAll(n.storeRoot(), 0o700); err != nil {
		return false, fmt.Errorf("kubestack: %w", err)
	}
	return kept, nil
}

// ctr runs ctr against the node's containerd in the CRI's namespace.
func (n *realNode) ctr(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.sock, "-n", "k8s.io"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubestack: %s: ctr %s: %w: %s", n.name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// importImages imports each docker-archive tarball into the node's containerd unless
// the store holds all its images already (imagesCurrent), records the imports, and
// removes every other image (see this file's first comment). It returns how many
// tarballs it imported. An import cut short leaves an image incomplete or not unpacked,
// which imagesCurrent does not count: the next Start imports it again.
func (n *realNode) importImages(ctx context.Context, tarballs []string) (imported int, err error) {
	rec := n.readStoreRecord()
	for _, tb := range tarballs {
		want, err := archiveImages(tb)
		if err != nil {
			return imported, err
		}
		current, err := n.imagesCurrent(ctx, want)
		if err != nil {
			return imported, err
		}
		if !current {
			if _, err := n.ctr(ctx, "images", "import", "--no-unpack=false", tb); err != nil {
				return imported, err
			}
			imported++
		}
		refs := make([]string, 0, len(want))
		for ref := range want {
			refs = append(refs, ref)
		}
		slices.Sort(refs)
		rec[tb] = refs
	}
	keep := map[string]bool{}
	for tb, refs := range rec {
		if _, err := os.Stat(tb); err != nil {
			delete(rec, tb)
			continue
		}
		for _, r := range refs {
			keep[r] = true
		}
	}
	if err := n.writeStoreRecord(rec); err != nil {
		return imported, err
	}
	out, err := n.ctr(ctx, "images", "ls", "-q")
	if err != nil {
		return imported, err
	}
	var drop []string
	for ref := range strings.FieldsSeq(out) {
		if !keep[ref] {
			drop = append(drop, ref)
		}
	}
	if len(drop) > 0 {
		// --sync: the content and snapshots no image needs are gone when it returns.
		if _, err := n.ctr(ctx, append([]string{"images", "rm", "--sync"}, drop...)...); err != nil {
			return imported, err
		}
	}
	return imported, nil
}

// archiveImages reads a docker-archive's manifest.json: every reference it holds and
// the digest of that image's configuration.
func archiveImages(tarPath string) (map[string]string, error) {
	f, err := os.Open(tarPath)
	if err != nil {
		return nil, fmt.Errorf("kubestack: %w", err)
	}
	defer f.Close()
	// tar.Reader skips the layers' bytes by seeking: only the headers are read.
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("kubestack: %s: no manifest.json (not a docker-archive)", tarPath)
		}
		if err != nil {
			return nil, fmt.Errorf("kubestack: %s: %w", tarPath, err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct {
			Config   string
			RepoTags []string
		}
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			return nil, fmt.Errorf("kubestack: %s: manifest.json: %w", tarPath, err)
		}
		out := map[string]string{}
		for _, e := range m {
			for _, t := range e.RepoTags {
				out[t] = e.Config
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("kubestack: %s: manifest.json names no image", tarPath)
		}
		return out, nil
	}
}

// imagesCurrent reports whether the node's containerd holds every image of want
// (reference → configuration digest), complete and unpacked, with that configuration.
func (n *realNode) imagesCurrent(ctx context.Context, want map[string]string) (bool, error) {
	ready, err := n.ctr(ctx, "images", "check", "-q")
	if err != nil {
		return false, err
	}
	readySet := map[string]bool{}
	for ref := range strings.FieldsSeq(ready) {
		readySet[ref] = true
	}
	listed, err := n.ctr(ctx, "images", "ls")
	if err != nil {
		return false, err
	}
	manifests := map[string]string{} // reference → manifest digest
	for line := range strings.Lines(listed) {
		if f := strings.Fields(line); len(f) >= 3 && strings.HasPrefix(f[2], "sha256:") {
			manifests[f[0]] = f[2]
		}
	}
	for ref, config := range want {
		if !readySet[ref] || manifests[ref] == "" {
			return false, nil
		}
		blob, err := n.ctr(ctx, "content", "get", manifests[ref])
		if err != nil {
			return false, err
		}
		var m struct {
			Config struct{ Digest string }
		}
		// A blob that does not read as a manifest leaves the digest empty: import it.
		_ = json.Unmarshal([]byte(blob), &m)
		if m.Config.Digest != config {
			return false, nil
		}
	}
	return true, nil
}

func (n *realNode) readStoreRecord() storeRecord {
	rec := storeRecord{}
	if data, err := os.ReadFile(filepath.Join(n.storeDir(), storeImports)); err == nil {
		_ = json.Unmarshal(data, &rec) // unreadable: nothing recorded, nothing kept
	}
	return rec
}

func (n *realNode) writeStoreRecord(rec storeRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	tmp := filepath.Join(n.storeDir(), storeImports+".tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(n.storeDir(), storeImports)); err != nil {
		return fmt.Errorf("kubestack: %w", err)
	}
	return nil
}

// removeContainers removes every container of the node's containerd (the pods'
// sandboxes and containers, with their snapshots), once its kubelet is stopped: their
// tasks are SIGKILLed and deleted first. It fails unless none is left.
func (n *realNode) removeContainers(ctx context.Context) error {
	tasks, err := n.ctr(ctx, "tasks", "ls", "-q")
	if err != nil {
		return err
	}
	var errs []error
	for id := range strings.FieldsSeq(tasks) {
		_, _ = n.ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		// delete waits for nothing: retry while the task is still stopping.
		for i := 0; ; i++ {
			_, err := n.ctr(ctx, "tasks", "delete", id)
			if err == nil || strings.Contains(err.Error(), "not found") {
				break
			}
			if i == 50 {
				errs = append(errs, err)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	ids, err := n.ctr(ctx, "containers", "ls", "-q")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	if list := strings.Fields(ids); len(list) > 0 {
		if _, err := n.ctr(ctx, append([]string{"containers", "delete"}, list...)...); err != nil {
			errs = append(errs, err)
		}
	}
	left, err := n.ctr(ctx, "containers", "ls", "-q")
	if err != nil {
		errs = append(errs, err)
	} else if l := strings.Fields(left); len(l) > 0 {
		errs = append(errs, fmt.Errorf("kubestack: %s: containers left in its store: %v", n.name, l))
	}
	return errors.Join(errs...)
}

// closeStore stops the node's containerd, after removing its containers, and marks the
// store clean when all of it went well; otherwise the store is left unmarked, and the
// next Start removes it.
func (n *realNode) closeStore(ctx context.Context) error {
	if n.containerd == nil {
		return nil
	}
	errs := []error{n.removeContainers(ctx)}
	// Stop fails when containerd had to be SIGKILLed: its store is then not trusted.
	if err := n.containerd.Stop(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, unmountUnder(n.storeDir()))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return writeFile(filepath.Join(n.storeDir(), storeClean), "")
}

// ImageStores says, per real node, whether its containerd found its kept store and how
// many of the image tarballs it imported at Start, e.g. "real-node-0: store kept, 0 of
// 2 tarballs imported".
func (c *Cluster) ImageStores() []string {
	var out []string
	for _, n := range c.realNodes {
		kept := "new store"
		if n.storeKept {
			kept = "store kept"
		}
		out = append(out, fmt.Sprintf("%s: %s, %d of %d tarballs imported", n.name, kept, n.imported, len(c.opts.Images)+1))
	}
	return out
}
