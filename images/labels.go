package images

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// OCI annotation keys of the labels on OpenDLC's own image (the image spec's
// pre-defined annotations, used as image config labels).
const (
	LabelTitle    = "org.opencontainers.image.title"
	LabelSource   = "org.opencontainers.image.source"
	LabelRevision = "org.opencontainers.image.revision"
	LabelVersion  = "org.opencontainers.image.version"
)

// SourceURL is the repository the image is built from (LabelSource).
const SourceURL = "https://github.com/opendlc/opendlc"

// DLCOptions configures BuildDLC.
type DLCOptions struct {
	// LayoutDir, when set, also receives the image as an OCI image layout.
	LayoutDir string
	// Tags are more tags of Domain/dlc in the tarball, beside the cache's tag and the
	// version's (e.g. "0.1.0-rc1" to install an upgrade); each must be a valid image
	// tag.
	Tags []string
}

// DLCImage is OpenDLC's built image.
type DLCImage struct {
	Image
	// Version is the OpenDLC version (the chart's appVersion, LabelVersion) and
	// Revision the commit it was built from (LabelRevision).
	Version, Revision string
	// Refs are every reference the tarball holds: Image.Ref (the cache's), then
	// Domain/dlc:Version, then one for each of DLCOptions.Tags.
	Refs []string
	// Labels are the image config's labels.
	Labels map[string]string
}

// tagPattern is a valid image tag (the distribution spec's).
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// appVersionPattern finds appVersion in the chart's Chart.yaml.
var appVersionPattern = regexp.MustCompile(`(?m)^appVersion:\s*"?([^"\s]+)"?\s*$`)

// ChartFile is where the OpenDLC version is kept: the Helm chart's appVersion, which is
// also the image tag the chart installs by default.
const ChartFile = "deploy/helm/opendlc/Chart.yaml"

// sourceVersion reads the OpenDLC version (ChartFile's appVersion) and the commit the
// source tree is at (git rev-parse HEAD; "unknown" outside a git checkout).
func sourceVersion(ctx context.Context, root string) (version, revision string, err error) {
	chart, err := os.ReadFile(filepath.Join(root, ChartFile))
	if err != nil {
		return "", "", fmt.Errorf("images: the OpenDLC version: %w", err)
	}
	m := appVersionPattern.FindSubmatch(chart)
	if m == nil {
		return "", "", fmt.Errorf("images: %s has no appVersion", ChartFile)
	}
	version = string(m[1])
	if !tagPattern.MatchString(version) {
		return "", "", fmt.Errorf("images: %s: appVersion %q is not a valid image tag", ChartFile, version)
	}
	revision = "unknown"
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "HEAD")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	if cmd.Run() == nil {
		revision = strings.TrimSpace(out.String())
	}
	return version, revision, nil
}

// checkTags refuses a tag that is no valid image tag, naming it.
func checkTags(tags []string) error {
	for _, t := range tags {
		if !tagPattern.MatchString(t) {
			return fmt.Errorf("images: tag %q is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]{0,127})", t)
		}
	}
	return nil
}
