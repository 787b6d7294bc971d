package schemas

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// Patterns used both in jsonschema struct tags (which cannot refer to constants) and in
// hand-written checks; TestPatternTags keeps the two in step.
const (
	dnsLabelPattern      = `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	envNamePattern       = `^[A-Za-z_][A-Za-z0-9_]*$`
	checkpointURIPattern = `^s3://[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]/.+$`
)

// patternMessages says in words what each pattern of a jsonschema tag expects.
var patternMessages = map[string]string{
	dnsLabelPattern: "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit",
	envNamePattern:  "must be a C identifier: letters, digits and '_', not starting with a digit",
	checkpointURIPattern: "must be s3://bucket/prefix, with a bucket name of 3-63 lowercase letters, " +
		"digits, '.' and '-' and a non-empty prefix",
}

var (
	dnsLabelRE      = regexp.MustCompile(dnsLabelPattern)
	envNameRE       = regexp.MustCompile(envNamePattern)
	dnsSubdomainRE  = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualifiedNameRE = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	s3URIRE         = regexp.MustCompile(`^s3://[a-z0-9][-a-z0-9.]{1,61}[a-z0-9](/.*)?$`)
	schemeRE        = regexp.MustCompile(`^[A-Za-z][-A-Za-z0-9+.]*:`)
)

// Bounds that struct tags cannot express (map sizes, map keys and values).
const (
	maxMapEntries       = 64
	maxLabelValueLength = 63
	maxAnnotationLength = 4096
	maxQualifiedNameLen = 63
	maxDNSSubdomainLen  = 253
	minS3BucketLength   = 3
	maxS3BucketLength   = 63
)

// This file also holds the checks every kind shares: validateTags enforces the bounds
// written in jsonschema struct tags (maxLength, minLength, maxItems, minItems, minimum,
// maximum, pattern, enum), and that required strings are set, so that the published JSON
// Schema and Validate cannot disagree about them.

// tagRules are the constraints of one struct field's jsonschema tag.
type tagRules struct {
	required             bool
	minLength, maxLength *int
	minItems, maxItems   *int
	minimum, maximum     *int64
	pattern              string
	enum                 []string
}

var tagRulesCache sync.Map // reflect.StructField's type+index -> tagRules

type fieldKey struct {
	t reflect.Type
	i int
}

func rulesFor(t reflect.Type, i int) tagRules {
	k := fieldKey{t, i}
	if r, ok := tagRulesCache.Load(k); ok {
		return r.(tagRules)
	}
	r := parseTagRules(t.Field(i))
	tagRulesCache.Store(k, r)
	return r
}

func parseTagRules(f reflect.StructField) tagRules {
	var r tagRules
	jsonTag := strings.Split(f.Tag.Get("json"), ",")
	r.required = !slices.Contains(jsonTag[1:], "omitempty") && !slices.Contains(jsonTag[1:], "omitzero")
	intp := func(v string) *int {
		n, err := strconv.Atoi(v)
		if err != nil {
			panic(fmt.Sprintf("schemas: bad jsonschema tag on %s: %q", f.Name, v))
		}
		return &n
	}
	int64p := func(v string) *int64 {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			panic(fmt.Sprintf("schemas: bad jsonschema tag on %s: %q", f.Name, v))
		}
		return &n
	}
	for _, kv := range splitTag(f.Tag.Get("jsonschema")) {
		name, v, _ := strings.Cut(kv, "=")
		switch name {
		case "minLength":
			r.minLength = intp(v)
		case "maxLength":
			r.maxLength = intp(v)
		case "minItems":
			r.minItems = intp(v)
		case "maxItems":
			r.maxItems = intp(v)
		case "minimum":
			r.minimum = int64p(v)
		case "maximum":
			r.maximum = int64p(v)
		case "pattern":
			r.pattern = v
		case "enum":
			r.enum = append(r.enum, v)
		}
	}
	return r
}

// splitTag splits a jsonschema tag on commas not escaped by a backslash, as
// github.com/invopop/jsonschema does.
func splitTag(tag string) []string {
	if tag == "" {
		return nil
	}
	var out []string
	cur := ""
	for part := range strings.SplitSeq(tag, ",") {
		if before, ok := strings.CutSuffix(cur, `\`); ok {
			cur = before + "," + part
			continue
		}
		if cur != "" {
			out = append(out, cur)
		}
		cur = part
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

var patternCache sync.Map // string -> *regexp.Regexp

func compiledPattern(p string) *regexp.Regexp {
	if re, ok := patternCache.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re := regexp.MustCompile(p)
	patternCache.Store(p, re)
	return re
}

func patternMessage(p string) string {
	if m, ok := patternMessages[p]; ok {
		return m
	}
	return "must match the pattern " + p
}

// validateTags checks v, and everything below it, against the jsonschema tags of the
// struct fields it holds. Durations must not be negative.
func validateTags(v reflect.Value, p Path, errs *ErrorList) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	t := v.Type()
	if t == reflect.TypeFor[Duration]() {
		if v.Int() < 0 {
			*errs = append(*errs, Invalid(p, "must not be negative"))
		}
		return
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshalerType) {
		return // another leaf, such as resource.Quantity
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fp := p.Child(name)
			if f.Anonymous && f.Tag.Get("json") == "" {
				fp = p
			}
			if applyRules(v.Field(i), rulesFor(t, i), fp, errs) {
				validateTags(v.Field(i), fp, errs)
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			validateTags(v.Index(i), p.Index(i), errs)
		}
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			validateTags(v.MapIndex(k), p.Key(k.String()), errs)
		}
	}
}

// applyRules checks one field's value against its rules. It returns false when the value
// is missing, so that nothing more is said about it.
func applyRules(v reflect.Value, r tagRules, p Path, errs *ErrorList) bool {
	add := func(format string, args ...any) { *errs = append(*errs, Invalid(p, format, args...)) }
	switch v.Kind() {
	case reflect.String:
		if v.Len() == 0 {
			if r.required {
				*errs = append(*errs, Required(p))
			}
			return false
		}
		checkString(v.String(), r, p, errs)
	case reflect.Slice:
		n := v.Len()
		if r.maxItems != nil && n > *r.maxItems {
			add("must have at most %d items", *r.maxItems)
		}
		if r.minItems != nil && n < *r.minItems {
			add("must have at least %d items", *r.minItems)
		}
		if v.Type().Elem().Kind() == reflect.String {
			// As in the JSON Schema, string rules of a list apply to its items.
			for i := range n {
				if s := v.Index(i).String(); s != "" {
					checkString(s, r, p.Index(i), errs)
				}
			}
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n := v.Int()
		if r.minimum != nil && n < *r.minimum {
			add("must be >= %d", *r.minimum)
		}
		if r.maximum != nil && n > *r.maximum {
			add("must be <= %d", *r.maximum)
		}
	}
	return true
}

func checkString(s string, r tagRules, p Path, errs *ErrorList) {
	add := func(format string, args ...any) { *errs = append(*errs, Invalid(p, format, args...)) }
	n := utf8.RuneCountInString(s)
	if r.maxLength != nil && n > *r.maxLength {
		add("must be at most %d characters", *r.maxLength)
		return
	}
	if r.minLength != nil && n < *r.minLength {
		add("must be at least %d characters", *r.minLength)
		return
	}
	if r.pattern != "" && !compiledPattern(r.pattern).MatchString(s) {
		add("%s", patternMessage(r.pattern))
		return
	}
	if len(r.enum) > 0 && !slices.Contains(r.enum, s) {
		add("must be one of %s", strings.Join(r.enum, ", "))
	}
}

// validateQualifiedName checks a Kubernetes-style key: an optional DNS-subdomain prefix
// and '/', then a name of at most 63 characters.
func validateQualifiedName(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && (prefix == "" || len(prefix) > maxDNSSubdomainLen || !dnsSubdomainRE.MatchString(prefix)):
		return fmt.Sprintf("key prefix must be a DNS subdomain of at most %d characters", maxDNSSubdomainLen)
	case name == "" || len(name) > maxQualifiedNameLen || !qualifiedNameRE.MatchString(name):
		return fmt.Sprintf("key must be [prefix/]name, where name is at most %d letters, digits, '-', '_' "+
			"and '.', starting and ending with a letter or digit", maxQualifiedNameLen)
	}
	return ""
}

// validateLabelValue checks a Kubernetes label value.
func validateLabelValue(v string) string {
	if v == "" {
		return ""
	}
	if len(v) > maxLabelValueLength || !qualifiedNameRE.MatchString(v) {
		return fmt.Sprintf("value must be at most %d letters, digits, '-', '_' and '.', "+
			"starting and ending with a letter or digit", maxLabelValueLength)
	}
	return ""
}

// validateLabels checks a map with Kubernetes label syntax (labels, node selectors).
func validateLabels(m map[string]string, p Path, errs *ErrorList) {
	if len(m) > maxMapEntries {
		*errs = append(*errs, Invalid(p, "must have at most %d entries", maxMapEntries))
	}
	for _, k := range sortedKeys(m) {
		if msg := validateQualifiedName(k); msg != "" {
			*errs = append(*errs, Invalid(p.Key(k), "%s", msg))
		}
		if msg := validateLabelValue(m[k]); msg != "" {
			*errs = append(*errs, Invalid(p.Key(k), "%s", msg))
		}
	}
}

// validateAnnotations checks a map of annotations: label keys, free values of bounded
// length.
func validateAnnotations(m map[string]string, p Path, errs *ErrorList) {
	if len(m) > maxMapEntries {
		*errs = append(*errs, Invalid(p, "must have at most %d entries", maxMapEntries))
	}
	for _, k := range sortedKeys(m) {
		if msg := validateQualifiedName(k); msg != "" {
			*errs = append(*errs, Invalid(p.Key(k), "%s", msg))
		}
		if utf8.RuneCountInString(m[k]) > maxAnnotationLength {
			*errs = append(*errs, Invalid(p.Key(k), "value must be at most %d characters", maxAnnotationLength))
		}
	}
}

// validateHeader checks what every document has: the jsonschema tags of obj's fields,
// apiVersion and kind (when given: Default fills them in) and the metadata.
func validateHeader(obj Object, apiVersion string, kind Kind, errs *ErrorList) {
	validateTags(reflect.ValueOf(obj), "", errs)
	if apiVersion != "" && apiVersion != APIVersion {
		*errs = append(*errs, Invalid(NewPath("apiVersion"), "must be %s", APIVersion))
	}
	if want := obj.GetKind(); kind != "" && kind != want {
		*errs = append(*errs, Invalid(NewPath("kind"), "must be %s", want))
	}
	validateMeta(obj.GetMeta(), NewPath("metadata"), errs)
}

// validateMeta checks the parts of ObjectMeta its tags cannot.
func validateMeta(m *ObjectMeta, p Path, errs *ErrorList) {
	validateLabels(m.Labels, p.Child("labels"), errs)
	validateAnnotations(m.Annotations, p.Child("annotations"), errs)
}

// validateEnv checks that environment variable names are unique.
func validateEnv(env []EnvVar, p Path, errs *ErrorList) {
	first := map[string]int{}
	for i, e := range env {
		if e.Name == "" {
			continue
		}
		if j, ok := first[e.Name]; ok {
			*errs = append(*errs, Invalid(p.Index(i).Child("name"), "duplicate name %q (first at %s)", e.Name, p.Index(j)))
			continue
		}
		first[e.Name] = i
	}
}

// validateS3URI checks s3://bucket[/prefix] and says what is wrong with the bucket.
func validateS3URI(uri string) string {
	rest := strings.TrimPrefix(uri, "s3://")
	bucket, _, _ := strings.Cut(rest, "/")
	if len(bucket) < minS3BucketLength || len(bucket) > maxS3BucketLength {
		return fmt.Sprintf("bucket name %q must be %d-%d characters", bucket, minS3BucketLength, maxS3BucketLength)
	}
	if !s3URIRE.MatchString(uri) {
		return fmt.Sprintf("bucket name %q must be lowercase letters, digits, '.' and '-', "+
			"starting and ending with a letter or digit", bucket)
	}
	return ""
}
