// Package examples holds the example documents of every kind, in one directory per
// subject; the tests keep every one of them a valid document that a stack started as
// `dlc up` starts it accepts as written.
package examples

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dlc "github.com/opendlc/opendlc/client"
	"github.com/opendlc/opendlc/embedded"
	"github.com/opendlc/opendlc/integration/itest"
	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// noExampleYet are the kinds that have no example under examples/ yet; every other kind
// must have at least one.
var noExampleYet = []schemas.Kind{}

// exampleFiles are the YAML files under examples/, sorted.
func exampleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example found under examples/")
	}
	slices.Sort(files)
	return files
}

// Every YAML file under examples/, whatever its kind, decodes strictly (schemas.Decode
// dispatches on its kind field) and validates, as `dlc validate -f` and the API check
// it.
func TestEveryExampleIsValid(t *testing.T) {
	seen := map[schemas.Kind][]string{}
	for _, file := range exampleFiles(t) {
		t.Run(file, func(t *testing.T) {
			obj := schemastest.ReadValid(t, file, schemas.Decode)
			if obj.GetMeta().Name == "" || obj.GetMeta().Workspace == "" {
				t.Errorf("metadata %+v: want a name and a (defaulted) workspace", obj.GetMeta())
			}
			seen[obj.GetKind()] = append(seen[obj.GetKind()], file)
		})
	}
	for _, k := range schemas.Kinds() {
		if len(seen[k]) == 0 && !slices.Contains(noExampleYet, k) {
			t.Errorf("no valid example of kind %s under examples/", k)
		}
	}
	t.Logf("examples by kind: %v", seen)
	for _, k := range noExampleYet {
		if len(seen[k]) > 0 {
			t.Logf("kind %s now has examples (%s): remove it from noExampleYet", k, strings.Join(seen[k], ", "))
		}
	}
}

// submitter creates a document of one kind through the SDK and removes what it made.
type submitter struct {
	create func(ctx context.Context, c *dlc.Client, doc []byte) error
	remove func(c *dlc.Client, ctx context.Context, ws, name string) error
}

// submitters has an entry for every kind (TestEveryExampleIsAcceptedByAStack fails
// naming a kind without one).
var submitters = map[schemas.Kind]submitter{
	schemas.KindTrainingJob: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.SubmitJob(ctx, doc)
			return err
		},
		remove: (*dlc.Client).DeleteJob,
	},
	schemas.KindExperiment: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.CreateExperiment(ctx, doc)
			return err
		},
		remove: (*dlc.Client).DeleteExperiment,
	},
	schemas.KindPipeline: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.RunPipeline(ctx, doc, nil)
			return err
		},
		remove: (*dlc.Client).DeletePipeline,
	},
	schemas.KindSchedule: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.CreateSchedule(ctx, doc)
			return err
		},
		remove: (*dlc.Client).DeleteSchedule,
	},
	schemas.KindTrigger: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.ApplyTrigger(ctx, doc)
			return err
		},
		remove: (*dlc.Client).DeleteTrigger,
	},
	schemas.KindPipelineTemplate: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.ApplyPipelineTemplate(ctx, doc)
			return err
		},
		remove: (*dlc.Client).DeletePipelineTemplate,
	},
	schemas.KindNotificationRule: {
		create: func(ctx context.Context, c *dlc.Client, doc []byte) error {
			_, err := c.ApplyRule(ctx, doc)
			return err
		},
		remove: (*dlc.Client).DeleteRule,
	},
}

// Every example is accepted as written by a stack started as `dlc up` starts it (real
// Temporal, NATS JetStream and S3; each workspace confined to its default storage
// location under embedded.DefaultStorageRoot): each file is submitted through the SDK,
// as `dlc submit -f` would (a job submitted, an experiment created, a pipeline run, a
// schedule, trigger or rule applied), then deleted, stopping whatever it started, so
// that nothing of it runs on.
func TestEveryExampleIsAcceptedByAStack(t *testing.T) {
	for _, k := range schemas.Kinds() {
		if _, ok := submitters[k]; !ok {
			t.Errorf("kind %s: no submitter, so its examples cannot be submitted", k)
		}
	}
	files := exampleFiles(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// `dlc up`'s defaults: --storage-isolation, --storage-root embedded.DefaultStorageRoot.
	e := itest.StartStack(t, ctx, embedded.Config{StorageIsolation: true, StorageRoot: embedded.DefaultStorageRoot})
	c := itest.AdminClient(t, e)
	// The examples are submitted at once: two of the same kind and name would collide.
	docs := map[string][]byte{}
	objs := map[string]schemas.Object{}
	fileOf := map[string]string{}
	for _, file := range files {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := schemas.Decode(doc)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		id := fmt.Sprintf("%s %s/%s", obj.GetKind(), obj.GetMeta().Workspace, obj.GetMeta().Name)
		if other, ok := fileOf[id]; ok {
			t.Fatalf("%s and %s are both %s: give each example a name of its own", other, file, id)
		}
		fileOf[id], docs[file], objs[file] = file, doc, obj
	}
	var accepted atomic.Int32
	t.Run("submit", func(t *testing.T) {
		for _, file := range files {
			t.Run(file, func(t *testing.T) {
				t.Parallel()
				doc, obj := docs[file], objs[file]
				s, ok := submitters[obj.GetKind()]
				if !ok {
					t.Fatalf("%s: kind %s cannot be submitted", file, obj.GetKind())
				}
				meta := obj.GetMeta()
				if err := s.create(ctx, c, doc); err != nil {
					t.Fatalf("%s: %s %s/%s refused: %v", file, obj.GetKind(), meta.Workspace, meta.Name, err)
				}
				accepted.Add(1)
				if err := s.remove(c, ctx, meta.Workspace, meta.Name); err != nil {
					t.Errorf("%s: deleting %s %s/%s: %v", file, obj.GetKind(), meta.Workspace, meta.Name, err)
				}
			})
		}
	})
	if int(accepted.Load()) != len(files) {
		t.Errorf("%d of %d examples accepted", accepted.Load(), len(files))
	}
	t.Logf("%d of %d examples accepted and deleted", accepted.Load(), len(files))
}
