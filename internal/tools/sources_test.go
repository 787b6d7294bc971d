package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// tools/schedplugins builds the coscheduler from the scheduler-plugins version the
// table and the CRD source name, against the Kubernetes the table stamps.
func TestSchedPluginsModuleMatchesTable(t *testing.T) {
	root, err := sourceRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, schedPluginsModule, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	if !regexp.MustCompile(`(?m)^\s*(require )?sigs\.k8s\.io/scheduler-plugins ` + regexp.QuoteMeta(schedPluginsVersion) + `$`).MatchString(mod) {
		t.Errorf("%s/go.mod does not require sigs.k8s.io/scheduler-plugins %s", schedPluginsModule, schedPluginsVersion)
	}
	if !strings.Contains(mod, "k8s.io/kubernetes => k8s.io/kubernetes "+schedPluginsKubeVersion+"\n") {
		t.Errorf("%s/go.mod does not replace k8s.io/kubernetes with %s", schedPluginsModule, schedPluginsKubeVersion)
	}
	if sources["sigs.k8s.io/scheduler-plugins"].Version != schedPluginsVersion {
		t.Error("the scheduler-plugins source is not the version the coscheduler is built from")
	}
	tool, ok := Lookup("coscheduler")
	if !ok || tool.Module != schedPluginsModule || !strings.Contains(tool.Version, srcMarker) {
		t.Errorf("coscheduler tool = %+v, want one built from %s with a source hash", tool, schedPluginsModule)
	}
	names, err := Expand(batchGroup)
	if err != nil || len(names) != 1 || names[0] != "coscheduler" {
		t.Errorf("Expand(%s) = %v, %v", batchGroup, names, err)
	}
}

func TestModuleDirUnknownModule(t *testing.T) {
	if _, err := ModuleDir(context.Background(), "example.com/nothing"); !errors.Is(err, ErrUnknownTool) {
		t.Errorf("ModuleDir(unknown) = %v, want ErrUnknownTool", err)
	}
}
