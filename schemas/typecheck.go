package schemas

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
)

// This file checks a generic JSON value against the Go type it will be unmarshalled into,
// so that every unknown field and every value of the wrong type is reported with its path
// before encoding/json (which stops at the first problem, and ignores unknown fields) runs.

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	quantityType        = reflect.TypeFor[resource.Quantity]()
)

// leafMessages replaces the errors of custom-unmarshalled types whose own messages are
// written for programmers.
var leafMessages = map[reflect.Type]string{
	quantityType: `must be a Kubernetes quantity such as "500m", "8" or "64Gi"`,
}

// checkTypes returns an error for every unknown field and every value of the wrong type in
// doc, which is to be unmarshalled into obj.
func checkTypes(doc map[string]any, obj any) ErrorList {
	var errs ErrorList
	checkValue(doc, reflect.TypeOf(obj), "", &errs)
	return errs
}

func checkValue(v any, t reflect.Type, p Path, errs *ErrorList) {
	if v == nil {
		// null leaves the field as it is, as in encoding/json.
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	wrongType := func() {
		*errs = append(*errs, Invalid(p, "must be %s", describeKind(t)))
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		raw, err := json.Marshal(v)
		if err == nil {
			err = reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
		}
		if err != nil {
			*errs = append(*errs, leafError(p, t, err))
		}
		return
	}
	if reflect.PointerTo(t).Implements(textUnmarshalerType) {
		s, ok := v.(string)
		if !ok {
			*errs = append(*errs, Invalid(p, "must be a string"))
			return
		}
		if err := reflect.New(t).Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
			*errs = append(*errs, leafError(p, t, err))
		}
		return
	}

	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			wrongType()
			return
		}
		fields := structFields(t)
		for _, k := range sortedKeys(m) {
			ft, ok := fields[k]
			if !ok {
				*errs = append(*errs, unknownField(p.Key(k), k, fields))
				continue
			}
			checkValue(m[k], ft, p.Child(k), errs)
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			wrongType()
			return
		}
		for _, k := range sortedKeys(m) {
			checkValue(m[k], t.Elem(), p.Key(k), errs)
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			// []byte is a base64 string.
			if _, ok := v.(string); !ok {
				*errs = append(*errs, Invalid(p, "must be a base64 string"))
			}
			return
		}
		l, ok := v.([]any)
		if !ok {
			wrongType()
			return
		}
		for i, e := range l {
			checkValue(e, t.Elem(), p.Index(i), errs)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrongType()
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			wrongType()
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			wrongType()
			return
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			if isRangeError(err) {
				lo, hi := -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1
				*errs = append(*errs, Invalid(p, "must be an integer between %d and %d", lo, hi))
			} else {
				wrongType()
			}
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := v.(json.Number)
		if !ok {
			wrongType()
			return
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			if isRangeError(err) {
				hi := uint64(math.MaxUint64) >> (64 - t.Bits())
				*errs = append(*errs, Invalid(p, "must be an integer between 0 and %d", hi))
			} else {
				wrongType()
			}
		}
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			wrongType()
			return
		}
		if _, err := strconv.ParseFloat(n.String(), t.Bits()); err != nil {
			*errs = append(*errs, Invalid(p, "must be a number in range"))
		}
	case reflect.Interface:
		if t.NumMethod() > 0 {
			*errs = append(*errs, Invalid(p, "cannot be set"))
		}
	}
}

func isRangeError(err error) bool {
	ne, ok := errors.AsType[*strconv.NumError](err)
	return ok && errors.Is(ne.Err, strconv.ErrRange)
}

func leafError(p Path, t reflect.Type, err error) *FieldError {
	if msg, ok := leafMessages[t]; ok {
		return Invalid(p, "%s", msg)
	}
	return Invalid(p, "%s", err.Error())
}

// unknownField reports key as unknown, suggesting the field the user probably meant.
func unknownField(p Path, key string, fields map[string]reflect.Type) *FieldError {
	best, bestDist := "", 3
	for name := range fields {
		d := editDistance(strings.ToLower(key), strings.ToLower(name))
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	// A suggestion must be close relative to the name, or every short key would match.
	if best != "" && (bestDist == 0 || bestDist*3 <= len(best)) {
		return Invalid(p, "unknown field; did you mean %q?", best)
	}
	return Invalid(p, "unknown field")
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

var structFieldsCache sync.Map // reflect.Type -> map[string]reflect.Type

// structFields maps the JSON names of t's fields, including those of embedded structs, to
// their types.
func structFields(t reflect.Type) map[string]reflect.Type {
	if f, ok := structFieldsCache.Load(t); ok {
		return f.(map[string]reflect.Type)
	}
	fields := map[string]reflect.Type{}
	addStructFields(t, fields)
	structFieldsCache.Store(t, fields)
	return fields
}

func addStructFields(t reflect.Type, fields map[string]reflect.Type) {
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				addStructFields(ft, fields)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, dup := fields[name]; !dup {
			fields[name] = f.Type
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// describeKind names the JSON type a Go type is read from: "a string", "an integer"...
func describeKind(t reflect.Type) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return "a value of another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean (true or false)"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return fmt.Sprintf("a %s", t.Kind())
}

// describeValue names the JSON type of a generic value.
func describeValue(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
