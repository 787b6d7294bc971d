package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/opendlc/opendlc/schemas"
)

func TestPath(t *testing.T) {
	tests := map[string]struct {
		path schemas.Path
		want string
	}{
		"root":            {path: "", want: ""},
		"top-level field": {path: schemas.NewPath("spec"), want: "spec"},
		"nested fields":   {path: schemas.NewPath("spec", "checkpoint", "uri"), want: "spec.checkpoint.uri"},
		"child of child":  {path: schemas.NewPath("spec").Child("roles").Child("worker", "replicas"), want: "spec.roles.worker.replicas"},
		"list index":      {path: schemas.NewPath("spec", "data").Index(2).Child("uri"), want: "spec.data[2].uri"},
		"plain map key":   {path: schemas.NewPath("spec", "roles").Key("worker").Child("replicas"), want: "spec.roles.worker.replicas"},
		"dotted map key": {
			path: schemas.NewPath("metadata", "labels").Key("app.kubernetes.io/name"),
			want: `metadata.labels["app.kubernetes.io/name"]`,
		},
		"empty map key":    {path: schemas.NewPath("metadata", "labels").Key(""), want: `metadata.labels[""]`},
		"key at the root":  {path: schemas.Path("").Key("kind"), want: "kind"},
		"index at the end": {path: schemas.NewPath("spec", "command").Index(0), want: "spec.command[0]"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.path.String()); diff != "" {
				t.Errorf("path (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFieldErrorConstructors(t *testing.T) {
	p := schemas.NewPath("spec", "framework")
	tests := map[string]struct {
		err  *schemas.FieldError
		want string
	}{
		"invalid": {
			err:  schemas.Invalid(schemas.NewPath("spec", "roles", "worker", "replicas"), "must be >= %d", 1),
			want: "spec.roles.worker.replicas: must be >= 1",
		},
		"required":      {err: schemas.Required(p), want: "spec.framework: required"},
		"not supported": {err: schemas.NotSupported(p, []schemas.Pool{"a", "b"}), want: "spec.framework: must be one of a, b"},
		"no field":      {err: &schemas.FieldError{Detail: "whole document"}, want: "whole document"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.err.Error()); diff != "" {
				t.Errorf("Error() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorList(t *testing.T) {
	list := schemas.ErrorList{
		{Field: "spec.roles.worker.replicas", Detail: "must be >= 1"},
		{Field: "metadata.name", Detail: "required"},
	}
	t.Run("Error prints one problem per line", func(t *testing.T) {
		want := "spec.roles.worker.replicas: must be >= 1\nmetadata.name: required"
		if diff := cmp.Diff(want, list.Error()); diff != "" {
			t.Errorf("Error() (-want +got):\n%s", diff)
		}
	})
	t.Run("JSON", func(t *testing.T) {
		// An encoder that does not escape HTML, as the HTTP API should use, keeps ">=".
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(list); err != nil {
			t.Fatal(err)
		}
		got := buf.Bytes()
		want := `[{"field":"spec.roles.worker.replicas","message":"must be >= 1"},{"field":"metadata.name","message":"required"}]` + "\n"
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("json (-want +got):\n%s", diff)
		}
		var back schemas.ErrorList
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(list, back); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})
	t.Run("empty list is an empty JSON array", func(t *testing.T) {
		got, err := json.Marshal(schemas.ErrorList(nil))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff("[]", string(got)); diff != "" {
			t.Errorf("json (-want +got):\n%s", diff)
		}
	})
	t.Run("Err", func(t *testing.T) {
		if err := schemas.ErrorList(nil).Err(); err != nil {
			t.Errorf("empty list: Err() = %v, want nil", err)
		}
		var got schemas.ErrorList
		if !errors.As(list.Err(), &got) {
			t.Fatalf("errors.As(%v, *ErrorList) = false", list.Err())
		}
		if diff := cmp.Diff(list, got); diff != "" {
			t.Errorf("errors.As (-want +got):\n%s", diff)
		}
	})
	t.Run("errors.As finds a FieldError", func(t *testing.T) {
		var fe *schemas.FieldError
		if !errors.As(list.Err(), &fe) {
			t.Fatal("errors.As(list, *FieldError) = false")
		}
		if diff := cmp.Diff(list[0], fe); diff != "" {
			t.Errorf("errors.As (-want +got):\n%s", diff)
		}
	})
	t.Run("Fields", func(t *testing.T) {
		want := []string{"spec.roles.worker.replicas", "metadata.name"}
		if diff := cmp.Diff(want, list.Fields()); diff != "" {
			t.Errorf("Fields() (-want +got):\n%s", diff)
		}
	})
}

func TestErrorListSort(t *testing.T) {
	tests := map[string]struct {
		fields []string
		want   []string
	}{
		"by path": {
			fields: []string{"spec.roles", "metadata.name", "apiVersion", "spec.command"},
			want:   []string{"apiVersion", "metadata.name", "spec.command", "spec.roles"},
		},
		"a field before its children": {
			fields: []string{"spec.roles.worker.replicas", "spec.roles.worker", "spec.roles"},
			want:   []string{"spec.roles", "spec.roles.worker", "spec.roles.worker.replicas"},
		},
		"indexes compare as numbers": {
			fields: []string{"spec.data[10].name", "spec.data[2].name", "spec.data[1].uri"},
			want:   []string{"spec.data[1].uri", "spec.data[2].name", "spec.data[10].name"},
		},
		"document errors first": {
			fields: []string{"kind", ""},
			want:   []string{"", "kind"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var list schemas.ErrorList
			for _, f := range tt.fields {
				list = append(list, &schemas.FieldError{Field: f, Detail: "x"})
			}
			list.Sort()
			if diff := cmp.Diff(tt.want, list.Fields()); diff != "" {
				t.Errorf("sorted (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("same path sorts by detail", func(t *testing.T) {
		list := schemas.ErrorList{{Field: "a", Detail: "b"}, {Field: "a", Detail: "a"}}
		list.Sort()
		want := schemas.ErrorList{{Field: "a", Detail: "a"}, {Field: "a", Detail: "b"}}
		if diff := cmp.Diff(want, list); diff != "" {
			t.Errorf("sorted (-want +got):\n%s", diff)
		}
	})
}
