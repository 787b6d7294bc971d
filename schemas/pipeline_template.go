package schemas

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// This file holds the two small languages of pipelines and triggers: templates
// (${params.lr}, ${steps.train.outputs.checkpoint}, ${event.data.key}) and condition
// expressions (steps.evaluate.metrics.accuracy > params.currentAccuracy). Both are pure:
// the pipeline workflow evaluates them deterministically.

// Roots of a template reference: ${<root>.<...>}. "${" followed by anything else (a
// shell's ${HOME}) is left as it is.
const (
	RefParams   = "params"
	RefSteps    = "steps"
	RefPipeline = "pipeline"
	RefEvent    = "event"
	// RefItem is the item of a fan-out step's child (${item}, ${item.<key>}): a
	// reference only in a step with withItems or withParam (ExpandItemTemplate);
	// elsewhere ${item} is left as written, as a shell's variable.
	RefItem = "item"
)

// Fields of a step reference: ${steps.<step>.<field>.<key>}.
const (
	StepOutputs = "outputs"
	StepMetrics = "metrics"
)

// TemplateRef is one ${...} reference of a template.
type TemplateRef struct {
	// Root is RefParams, RefSteps, RefPipeline or RefEvent.
	Root string
	// Name is the parameter's name, the step's name, or the pipeline field (name or
	// workspace).
	Name string
	// Field is StepOutputs or StepMetrics (steps only).
	Field string
	// Key is the output's or metric's key (steps only).
	Key string
	// Path is the event field (event only).
	Path FieldPath
	// Raw is the text between "${" and "}".
	Raw string
}

// String returns the reference as written: ${...}.
func (r TemplateRef) String() string { return "${" + r.Raw + "}" }

var (
	identRE     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	metricKeyRE = regexp.MustCompile(`^[A-Za-z0-9_][-A-Za-z0-9_./]*$`)
)

// parseRef parses the text between "${" and "}". ok is false when the root is not one of
// ours (the text is then not a reference). item says ${item} and ${item.<key>} are
// references (a fan-out step's fields).
func parseRef(raw string, item bool) (ref TemplateRef, ok bool, err error) {
	root, rest, _ := strings.Cut(raw, ".")
	ref = TemplateRef{Root: root, Raw: raw}
	switch root {
	case RefItem:
		if !item {
			return ref, false, nil
		}
		if raw != RefItem && !identRE.MatchString(rest) {
			return ref, true, fmt.Errorf("${%s}: must be ${item} or ${item.<key>}, a key of letters, digits and '_'", raw)
		}
		ref.Key = rest
	case RefParams:
		if !identRE.MatchString(rest) {
			return ref, true, fmt.Errorf("${%s}: a parameter name is letters, digits and '_'", raw)
		}
		ref.Name = rest
	case RefPipeline:
		if rest != "name" && rest != "workspace" && !slices.Contains(exitRefs, rest) {
			return ref, true, fmt.Errorf("${%s}: must be ${pipeline.name}, ${pipeline.workspace}, or in an onExit step "+
				"${pipeline.status}, ${pipeline.failedStep} or ${pipeline.message}", raw)
		}
		ref.Name = rest
	case RefSteps:
		parts := strings.SplitN(rest, ".", 3)
		if len(parts) != 3 || !dnsLabelRE.MatchString(parts[0]) ||
			(parts[1] != StepOutputs && parts[1] != StepMetrics) || parts[2] == "" {
			return ref, true, fmt.Errorf("${%s}: must be ${steps.<step>.outputs.<key>} or ${steps.<step>.metrics.<key>}", raw)
		}
		ref.Name, ref.Field, ref.Key = parts[0], parts[1], parts[2]
		if ref.Field == StepMetrics && !metricKeyRE.MatchString(ref.Key) {
			return ref, true, fmt.Errorf("${%s}: invalid metric key %q", raw, ref.Key)
		}
		if ref.Field == StepOutputs && !outputKeyRE.MatchString(ref.Key) && !isBestParamsKey(ref.Key) {
			return ref, true, fmt.Errorf("${%s}: invalid output key %q", raw, ref.Key)
		}
	case RefEvent:
		p, err := ParseFieldPath(rest)
		if err != nil {
			return ref, true, fmt.Errorf("${%s}: %w", raw, err)
		}
		ref.Path = p
	default:
		return ref, false, nil
	}
	return ref, true, nil
}

// ParseTemplate returns the references of a template, in order.
func ParseTemplate(s string) ([]TemplateRef, error) {
	return parseTemplate(s, false)
}

// ParseItemTemplate is ParseTemplate for a fan-out step's field, where ${item} and
// ${item.<key>} are references too.
func ParseItemTemplate(s string) ([]TemplateRef, error) {
	return parseTemplate(s, true)
}

func parseTemplate(s string, item bool) ([]TemplateRef, error) {
	var refs []TemplateRef
	_, err := expandTemplate(s, item, func(r TemplateRef) (string, error) {
		refs = append(refs, r)
		return "", nil
	})
	return refs, err
}

// ExpandTemplate replaces every reference in s with what resolve returns for it. Text
// that is not a reference, including "${" followed by another root, is kept.
func ExpandTemplate(s string, resolve func(TemplateRef) (string, error)) (string, error) {
	return expandTemplate(s, false, resolve)
}

// ExpandItemTemplate is ExpandTemplate for a fan-out step's field: ${item} and
// ${item.<key>} are references too (Root RefItem, Key the key or "").
func ExpandItemTemplate(s string, resolve func(TemplateRef) (string, error)) (string, error) {
	return expandTemplate(s, true, resolve)
}

func expandTemplate(s string, item bool, resolve func(TemplateRef) (string, error)) (string, error) {
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		b.WriteString(s[:i])
		rest := s[i+2:]
		before, after, ok0 := strings.Cut(rest, "}")
		if !ok0 {
			root, _, _ := strings.Cut(rest, ".")
			if root == RefParams || root == RefSteps || root == RefPipeline || root == RefEvent || (item && root == RefItem) {
				return "", fmt.Errorf("unterminated ${%s", rest)
			}
			b.WriteString(s[i:])
			return b.String(), nil
		}
		ref, ok, err := parseRef(before, item)
		if err != nil {
			return "", err
		}
		if !ok {
			b.WriteString("${")
			s = rest
			continue
		}
		v, err := resolve(ref)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
		s = after
	}
}

// JobTemplateFields calls fn with the path (below p) and a pointer to every string of a
// job spec where a pipeline or trigger substitutes references, in a stable order.
func JobTemplateFields(spec *TrainingJobSpec, p Path, fn func(Path, *string)) {
	for i := range spec.Command {
		fn(p.Child("command").Index(i), &spec.Command[i])
	}
	for i := range spec.Args {
		fn(p.Child("args").Index(i), &spec.Args[i])
	}
	for i := range spec.Env {
		fn(p.Child("env").Index(i).Child("value"), &spec.Env[i].Value)
	}
	if spec.WorkingDir != "" {
		fn(p.Child("workingDir"), &spec.WorkingDir)
	}
	for _, name := range sortedKeys(spec.Roles) {
		role := spec.Roles[name]
		rp := p.Child("roles").Key(name)
		// Copy the lists: the spec may share them with another (a template).
		role.Command = append([]string(nil), role.Command...)
		role.Args = append([]string(nil), role.Args...)
		role.Env = append([]EnvVar(nil), role.Env...)
		for i := range role.Command {
			fn(rp.Child("command").Index(i), &role.Command[i])
		}
		for i := range role.Args {
			fn(rp.Child("args").Index(i), &role.Args[i])
		}
		for i := range role.Env {
			fn(rp.Child("env").Index(i).Child("value"), &role.Env[i].Value)
		}
		spec.Roles[name] = role
	}
	if spec.Checkpoint != nil {
		fn(p.Child("checkpoint", "uri"), &spec.Checkpoint.URI)
		if spec.Checkpoint.ResumeFrom != "" {
			fn(p.Child("checkpoint", "resumeFrom"), &spec.Checkpoint.ResumeFrom)
		}
	}
	for i := range spec.Data {
		fn(p.Child("data").Index(i).Child("uri"), &spec.Data[i].URI)
	}
	if spec.Metrics != nil {
		for i, c := range spec.Metrics.Collectors {
			if c.File != nil {
				fn(p.Child("metrics", "collectors").Index(i).Child("file", "path"), &c.File.Path)
			}
		}
	}
}

// CopyJobSpec returns a deep enough copy of a job spec for JobTemplateFields to change
// without touching the original.
func CopyJobSpec(spec *TrainingJobSpec) TrainingJobSpec {
	c := *spec
	c.Command = append([]string(nil), spec.Command...)
	c.Args = append([]string(nil), spec.Args...)
	c.Env = append([]EnvVar(nil), spec.Env...)
	c.Data = append([]DataSource(nil), spec.Data...)
	if spec.Metrics != nil {
		m := MetricsSpec{Collectors: append([]MetricCollector(nil), spec.Metrics.Collectors...)}
		for i, col := range m.Collectors {
			if col.File != nil {
				f := *col.File
				m.Collectors[i].File = &f
			}
		}
		c.Metrics = &m
	}
	if spec.Checkpoint != nil {
		ck := *spec.Checkpoint
		c.Checkpoint = &ck
	}
	if spec.Roles != nil {
		c.Roles = make(map[string]RoleSpec, len(spec.Roles))
		for _, k := range sortedKeys(spec.Roles) {
			c.Roles[k] = spec.Roles[k]
		}
	}
	return c
}

// ConditionExpr is a parsed StepCondition expression: comparisons joined by && and ||.
type ConditionExpr struct {
	// Any holds the ||-separated terms; each term's comparisons must all hold.
	Any [][]Comparison
}

// Comparison is "left op right".
type Comparison struct {
	Left, Right Operand
	Op          string
}

// Operand is a number or a reference to one.
type Operand struct {
	// Ref is set for a reference (params or steps.<step>.metrics); else Number is the
	// value.
	Ref    *TemplateRef
	Number float64
}

func (o Operand) String() string {
	if o.Ref != nil {
		return o.Ref.Raw
	}
	return strconv.FormatFloat(o.Number, 'g', -1, 64)
}

var comparisonOps = []string{"<=", ">=", "==", "!=", "<", ">"}

// ParseCondition parses a condition expression.
func ParseCondition(s string) (*ConditionExpr, error) {
	toks, err := lexCondition(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, errors.New("empty expression")
	}
	c := &ConditionExpr{}
	term := []Comparison{}
	for i := 0; ; {
		if len(toks)-i < 3 {
			return nil, fmt.Errorf("expected a comparison such as \"a > b\" at %q", strings.Join(toks[i:], " "))
		}
		left, err := parseOperand(toks[i])
		if err != nil {
			return nil, err
		}
		op := toks[i+1]
		if !isComparisonOp(op) {
			return nil, fmt.Errorf("expected one of %s after %q, got %q", strings.Join(comparisonOps, " "), toks[i], op)
		}
		right, err := parseOperand(toks[i+2])
		if err != nil {
			return nil, err
		}
		term = append(term, Comparison{Left: left, Op: op, Right: right})
		i += 3
		if i == len(toks) {
			c.Any = append(c.Any, term)
			return c, nil
		}
		switch toks[i] {
		case "&&":
		case "||":
			c.Any = append(c.Any, term)
			term = []Comparison{}
		default:
			return nil, fmt.Errorf("expected && or || after %q, got %q", strings.Join(toks[i-3:i], " "), toks[i])
		}
		i++
	}
}

func isComparisonOp(s string) bool {
	return slices.Contains(comparisonOps, s)
}

// lexCondition splits an expression into operands and operators.
func lexCondition(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case strings.HasPrefix(s[i:], "&&") || strings.HasPrefix(s[i:], "||"):
			toks = append(toks, s[i:i+2])
			i += 2
		case c == '<' || c == '>' || c == '=' || c == '!':
			if i+1 < len(s) && s[i+1] == '=' {
				toks = append(toks, s[i:i+2])
				i += 2
			} else if c == '<' || c == '>' {
				toks = append(toks, s[i:i+1])
				i++
			} else {
				return nil, fmt.Errorf("unexpected %q at column %d", c, i+1)
			}
		case strings.HasPrefix(s[i:], "${"):
			j := strings.IndexByte(s[i:], '}')
			if j < 0 {
				return nil, fmt.Errorf("unterminated %q", s[i:])
			}
			toks = append(toks, s[i:i+j+1])
			i += j + 1
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\n<>=!&|", rune(s[j])) {
				j++
			}
			if j == i {
				return nil, fmt.Errorf("unexpected %q at column %d", c, i+1)
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

func parseOperand(tok string) (Operand, error) {
	raw := tok
	if strings.HasPrefix(tok, "${") && strings.HasSuffix(tok, "}") {
		raw = tok[2 : len(tok)-1]
	} else if x, err := strconv.ParseFloat(tok, 64); err == nil {
		return Operand{Number: x}, nil
	}
	ref, ok, err := parseRef(raw, false)
	if err != nil {
		return Operand{}, err
	}
	if !ok || !(ref.Root == RefParams || (ref.Root == RefSteps && ref.Field == StepMetrics)) {
		return Operand{}, fmt.Errorf("%q: an operand is a number, params.<name> or steps.<step>.metrics.<key>", tok)
	}
	return Operand{Ref: &ref}, nil
}

// Refs returns the condition's references, in order.
func (c *ConditionExpr) Refs() []TemplateRef {
	var refs []TemplateRef
	for _, term := range c.Any {
		for _, cmp := range term {
			for _, o := range []Operand{cmp.Left, cmp.Right} {
				if o.Ref != nil {
					refs = append(refs, *o.Ref)
				}
			}
		}
	}
	return refs
}

// Eval evaluates the condition with resolve giving each reference's number. It returns
// the value and an explanation with the operands' values, such as
// "steps.evaluate.metrics.accuracy (0.91) > params.currentAccuracy (0.88)".
func (c *ConditionExpr) Eval(resolve func(TemplateRef) (float64, error)) (bool, string, error) {
	value := func(o Operand) (float64, string, error) {
		if o.Ref == nil {
			return o.Number, o.String(), nil
		}
		x, err := resolve(*o.Ref)
		if err != nil {
			return 0, "", err
		}
		return x, fmt.Sprintf("%s (%s)", o.Ref.Raw, strconv.FormatFloat(x, 'g', -1, 64)), nil
	}
	var terms []string
	result := false
	for _, term := range c.Any {
		all := true
		var parts []string
		for _, cmp := range term {
			l, ls, err := value(cmp.Left)
			if err != nil {
				return false, "", err
			}
			r, rs, err := value(cmp.Right)
			if err != nil {
				return false, "", err
			}
			var ok bool
			switch cmp.Op {
			case "<":
				ok = l < r
			case "<=":
				ok = l <= r
			case ">":
				ok = l > r
			case ">=":
				ok = l >= r
			case "==":
				ok = l == r
			case "!=":
				ok = l != r
			}
			all = all && ok
			parts = append(parts, ls+" "+cmp.Op+" "+rs)
		}
		result = result || all
		terms = append(terms, strings.Join(parts, " && "))
	}
	return result, strings.Join(terms, " || "), nil
}

// FieldPath is a path into a JSON document: keys separated by '.', list indexes in
// brackets, such as data.Records[0].s3.object.key.
type FieldPath []PathElem

// PathElem is one key or one list index of a FieldPath.
type PathElem struct {
	Key     string
	Index   int
	IsIndex bool
}

var fieldKeyRE = regexp.MustCompile(`^[A-Za-z0-9_$-]+`)

// ParseFieldPath parses a field path: keys of letters, digits, '_', '-' and '$',
// separated by '.', each optionally followed by [index].
func ParseFieldPath(s string) (FieldPath, error) {
	if s == "" {
		return nil, errors.New("empty field path")
	}
	var p FieldPath
	rest := s
	for {
		k := fieldKeyRE.FindString(rest)
		if k == "" {
			return nil, fmt.Errorf("invalid field path %q: expected a key at %q", s, rest)
		}
		p = append(p, PathElem{Key: k})
		rest = rest[len(k):]
		for strings.HasPrefix(rest, "[") {
			j := strings.IndexByte(rest, ']')
			if j < 0 {
				return nil, fmt.Errorf("invalid field path %q: unterminated [", s)
			}
			n, err := strconv.Atoi(rest[1:j])
			if err != nil || n < 0 || n > 1<<20 {
				return nil, fmt.Errorf("invalid field path %q: %q is not a list index", s, rest[1:j])
			}
			p = append(p, PathElem{Index: n, IsIndex: true})
			rest = rest[j+1:]
		}
		if rest == "" {
			return p, nil
		}
		if rest[0] != '.' {
			return nil, fmt.Errorf("invalid field path %q: expected '.' or '[' at %q", s, rest)
		}
		rest = rest[1:]
	}
}

// Lookup returns the value at the path in a document decoded by encoding/json into
// generic values (map[string]any, []any...), and whether it is there.
func (p FieldPath) Lookup(doc any) (any, bool) {
	v := doc
	for _, e := range p {
		if e.IsIndex {
			l, ok := v.([]any)
			if !ok || e.Index >= len(l) {
				return nil, false
			}
			v = l[e.Index]
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[e.Key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// String returns the path as written.
func (p FieldPath) String() string {
	var b strings.Builder
	for i, e := range p {
		if e.IsIndex {
			fmt.Fprintf(&b, "[%d]", e.Index)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.Key)
	}
	return b.String()
}
