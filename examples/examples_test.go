// Package examples holds the example documents of every kind, in one directory per
// subject; the test keeps every one of them a valid document.
package examples

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/opendlc/opendlc/schemas"
	"github.com/opendlc/opendlc/schemas/schemastest"
)

// noExampleYet are the kinds that have no example under examples/ yet; every other kind
// must have at least one.
var noExampleYet = []schemas.Kind{schemas.KindNotificationRule}

// Every YAML file under examples/, whatever its kind, decodes strictly (schemas.Decode
// dispatches on its kind field) and validates, as `dlc validate -f` and the API check
// it.
func TestEveryExampleIsValid(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no example found under examples/")
	}

	seen := map[schemas.Kind][]string{}
	for _, file := range files {
		t.Run(filepath.ToSlash(file), func(t *testing.T) {
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
