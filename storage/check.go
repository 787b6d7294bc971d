package storage

import (
	"reflect"
	"strings"

	"github.com/opendlc/opendlc/schemas"
)

// URI is one S3 URI a document names, with its field path.
type URI struct {
	Field schemas.Path
	Value string
}

// URIs returns every S3 URI doc names, in field order: checkpoint.uri and
// checkpoint.resumeFrom, the uri of each data source without a secretRef (one with a
// secretRef is read with the workspace's own credentials, not the platform's), the
// s3:// path of each metrics file collector (which the worker reads), and
// skipIfNoNewDataUnder, wherever they appear (a job's spec, an experiment's trial
// template, a pipeline's steps, a schedule's or a trigger's templates). doc is a
// pointer to any kind's document, or a spec.
func URIs(doc any) []URI {
	var out []URI
	walk(reflect.ValueOf(doc), "", &out)
	return out
}

var (
	checkpointType = reflect.TypeFor[schemas.CheckpointSpec]()
	dataType       = reflect.TypeFor[schemas.DataSource]()
	fileType       = reflect.TypeFor[schemas.FileCollector]()
)

// walk visits v, whose field path is p, and collects its URIs.
func walk(v reflect.Value, p schemas.Path, out *[]URI) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walk(v.Elem(), p, out)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walk(v.Index(i), p.Index(i), out)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			if iter.Key().Kind() == reflect.String {
				walk(iter.Value(), p.Key(iter.Key().String()), out)
			}
		}
	case reflect.Struct:
		walkStruct(v, p, out)
	}
}

func walkStruct(v reflect.Value, p schemas.Path, out *[]URI) {
	switch v.Type() {
	case checkpointType:
		ck := v.Interface().(schemas.CheckpointSpec)
		add(out, p.Child("uri"), ck.URI)
		add(out, p.Child("resumeFrom"), ck.ResumeFrom)
		return
	case dataType:
		d := v.Interface().(schemas.DataSource)
		if d.SecretRef == "" && strings.HasPrefix(d.URI, "s3://") {
			add(out, p.Child("uri"), d.URI)
		}
		return
	case fileType:
		if f := v.Interface().(schemas.FileCollector); strings.HasPrefix(f.Path, "s3://") {
			add(out, p.Child("path"), f.Path)
		}
		return
	}
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		fp := p
		if !f.Anonymous || name != "" {
			if name == "" {
				name = f.Name
			}
			fp = p.Child(name)
		}
		if name == "skipIfNoNewDataUnder" && f.Type.Kind() == reflect.String {
			add(out, fp, v.Field(i).String())
			continue
		}
		walk(v.Field(i), fp, out)
	}
}

func add(out *[]URI, p schemas.Path, value string) {
	if value != "" {
		*out = append(*out, URI{Field: p, Value: value})
	}
}

// Check returns an error for each URI of doc (URIs) outside locs, naming its field.
// A template URI (one with "${") is refused only when its fixed part, before the first
// "${", cannot lead into a location; the worker checks the substituted URI again when
// the job launches (CheckJob). No locations (nil) means no restriction.
func Check(doc any, locs []Location) schemas.ErrorList {
	if locs == nil {
		return nil
	}
	var errs schemas.ErrorList
	for _, u := range URIs(doc) {
		if head, _, templ := strings.Cut(u.Value, "${"); templ {
			if mayExpandInto(head, locs) {
				continue
			}
		} else if Within(u.Value, locs) {
			continue
		}
		errs = append(errs, schemas.Invalid(u.Field, "%s is outside the workspace's storage (%s)", u.Value, describe(locs)))
	}
	return errs
}

// describe lists locs for an error message.
func describe(locs []Location) string {
	if len(locs) == 0 {
		return "none"
	}
	s := make([]string, len(locs))
	for i, l := range locs {
		s[i] = l.String()
	}
	return strings.Join(s, ", ")
}
