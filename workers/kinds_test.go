package workers

import (
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
)

// Every kind registers with the worker (kinds.go): a workflow that RegisterWorkflows
// registers under its wire name and activities that register, or what runs its
// objects instead.
func TestEveryKindHasAWorker(t *testing.T) {
	var n names
	RegisterWorkflows(&n)
	registered := map[schemas.Kind]kindWorker{}
	for _, k := range workerKinds {
		if _, dup := registered[k.kind]; dup {
			t.Errorf("kind %s registers twice in workerKinds (workers/kinds.go)", k.kind)
		}
		registered[k.kind] = k
		if !slices.Contains(schemas.Kinds(), k.kind) {
			t.Errorf("workerKinds registers kind %s, which is not in schemas.Kinds() (schemas/kinds.go)", k.kind)
		}
	}
	for _, kind := range schemas.Kinds() {
		k, ok := registered[kind]
		if !ok {
			t.Errorf("kind %s has no worker registration: register a kindWorker for it in workerKinds (workers/kinds.go)", kind)
			continue
		}
		if err := k.check(); err != nil {
			t.Errorf("%v (workers/kinds.go)", err)
			continue
		}
		if k.elsewhere != "" {
			continue
		}
		if !slices.Contains(n.workflows, k.name) {
			t.Errorf("kind %s: RegisterWorkflows does not register its workflow %s", kind, k.name)
		}
		var acts names
		if err := k.activities(&acts, &deps{}); err != nil {
			t.Errorf("kind %s: registering its activities: %v", kind, err)
		}
		if len(acts.activities) == 0 {
			t.Errorf("kind %s: its activities register none", kind)
		}
	}
}

// A registration that misses a part is refused, naming the part.
func TestKindWorkerRefusesMissingParts(t *testing.T) {
	whole := workerKinds[slices.IndexFunc(workerKinds, func(k kindWorker) bool { return k.kind == schemas.KindSchedule })]
	for name, c := range map[string]struct {
		change func(*kindWorker)
		want   string
	}{
		"workflow":   {func(k *kindWorker) { k.workflow = nil }, "kind Schedule registers no workflow"},
		"name":       {func(k *kindWorker) { k.name = "" }, "kind Schedule registers its workflow without a wire name"},
		"activities": {func(k *kindWorker) { k.activities = nil }, "kind Schedule registers no activities"},
		"both":       {func(k *kindWorker) { k.elsewhere = "a dispatcher" }, "kind Schedule registers a workflow and says something else runs it"},
	} {
		k := whole
		c.change(&k)
		if err := k.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := whole.check(); err != nil {
		t.Errorf("a whole registration is refused: %v", err)
	}
}
