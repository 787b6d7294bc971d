package schemas

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// This file lets DecodeValid report every problem of a document at once: when decoding
// finds values of the wrong type (a bad quantity, a bad duration, a string where a number
// belongs, an unknown field), the document is decoded again without those values and
// validated, and the semantic problems join the type problems in one ErrorList.

// withSemanticErrors adds to typeErrs, the field-path problems decoding found, the
// problems Validate finds in the rest of the document. A semantic problem at a field that
// has a type problem, or below one, is left out: it only says that the field is missing.
// When the rest cannot be decoded (an unknown kind, a duplicate key) typeErrs is returned
// as it is.
func withSemanticErrors[D interface{ Validate() ErrorList }](data []byte, typeErrs ErrorList, decode func([]byte) (D, error)) ErrorList {
	doc, _, err := parse(data)
	if err != nil {
		return typeErrs
	}
	for _, fe := range typeErrs {
		removeAt(doc, fe.Field)
	}
	pruned, err := json.Marshal(doc)
	if err != nil {
		return typeErrs
	}
	rest, err := decode(pruned)
	if err != nil {
		return typeErrs
	}
	covering := append(ErrorList(nil), typeErrs...)
	for _, fe := range typeErrs {
		if p, ok := suggestedField(fe); ok {
			covering = append(covering, &FieldError{Field: p})
		}
	}
	all := append(ErrorList(nil), typeErrs...)
	for _, fe := range rest.Validate() {
		if !coveredBy(fe.Field, covering) {
			all = append(all, fe)
		}
	}
	all.Sort()
	return all
}

// suggestedField returns the path of the field an unknown field's error suggests
// ("maxTrial: unknown field; did you mean "maxTrials"?" gives spec.maxTrials): that the
// field is missing is the same mistake, not another one.
func suggestedField(fe *FieldError) (string, bool) {
	_, q, ok := strings.Cut(fe.Detail, "unknown field; did you mean ")
	if !ok {
		return "", false
	}
	name, err := strconv.Unquote(strings.TrimSuffix(q, "?"))
	if err != nil {
		return "", false
	}
	segs, err := parsePath(fe.Field)
	if err != nil || len(segs) == 0 {
		return "", false
	}
	var p Path
	for _, s := range segs[:len(segs)-1] {
		if s.isIdx {
			p = p.Index(s.index)
		} else {
			p = p.Key(s.key)
		}
	}
	return p.Key(name).String(), true
}

// coveredBy reports whether a semantic problem at field is explained by a type problem:
// one at the same field, above it, or below it (a problem with a whole object whose member
// had the wrong type). Problems with the whole document or a top-level section are never
// covered: they are about something else.
func coveredBy(field string, typeErrs ErrorList) bool {
	for _, te := range typeErrs {
		if te.Field == "" {
			continue
		}
		if field == te.Field || isBelow(field, te.Field) {
			return true
		}
		if isBelow(te.Field, field) && strings.ContainsAny(field, ".[") {
			return true
		}
	}
	return false
}

// isBelow reports whether path is strictly below parent.
func isBelow(path, parent string) bool {
	rest, ok := strings.CutPrefix(path, parent)
	return ok && rest != "" && (rest[0] == '.' || rest[0] == '[')
}

// pathSegment is one step of a Path: a field or map key, or a list index.
type pathSegment struct {
	key   string
	index int
	isIdx bool
}

// parsePath splits a Path as written by Child, Key and Index into its steps.
func parsePath(p string) ([]pathSegment, error) {
	var segs []pathSegment
	for p != "" {
		switch {
		case p[0] == '.':
			p = p[1:]
		case strings.HasPrefix(p, `["`):
			q, err := strconv.QuotedPrefix(p[1:])
			if err != nil {
				return nil, err
			}
			k, _ := strconv.Unquote(q)
			rest := p[1+len(q):]
			if !strings.HasPrefix(rest, "]") {
				return nil, errors.New("unterminated key")
			}
			segs = append(segs, pathSegment{key: k})
			p = rest[1:]
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return nil, errors.New("unterminated index")
			}
			i, err := strconv.Atoi(p[1:end])
			if err != nil {
				return nil, err
			}
			segs = append(segs, pathSegment{index: i, isIdx: true})
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			segs = append(segs, pathSegment{key: p[:end]})
			p = p[end:]
		}
	}
	return segs, nil
}

// removeAt removes the value at path from doc: an object member is deleted, a list
// element becomes null so that the indexes of the others (and of their problems) stay.
// A path that does not lead to a value is ignored.
func removeAt(doc map[string]any, path string) {
	segs, err := parsePath(path)
	if err != nil || len(segs) == 0 {
		return
	}
	var cur any = doc
	for i, s := range segs {
		last := i == len(segs)-1
		switch c := cur.(type) {
		case map[string]any:
			if s.isIdx {
				return
			}
			if last {
				delete(c, s.key)
				return
			}
			cur = c[s.key]
		case []any:
			if !s.isIdx || s.index < 0 || s.index >= len(c) {
				return
			}
			if last {
				c[s.index] = nil
				return
			}
			cur = c[s.index]
		default:
			return
		}
	}
}
