package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	yamlv3 "gopkg.in/yaml.v3"
	"sigs.k8s.io/yaml"
)

// MaxDocumentSize is the largest document Decode accepts, in bytes (1 MiB).
const MaxDocumentSize = 1 << 20

// maxDepth bounds the nesting of a document; the deepest real field is far shallower.
const maxDepth = 32

var errTooDeep = fmt.Errorf("values are nested more than %d levels deep", maxDepth)

// Object is a document of any kind: TrainingJob, and later Experiment, Schedule, Trigger
// and Pipeline.
type Object interface {
	// GetKind returns the document's kind.
	GetKind() Kind
	// GetMeta returns the document's metadata, for reading or changing it.
	GetMeta() *ObjectMeta
	// Validate returns every problem with the document, sorted by field path; nil when
	// the document is valid.
	Validate() ErrorList
	// Default fills in fields the user left empty (workspace, pool...). Decode calls it.
	Default()
}

var _ Object = (*TrainingJob)(nil)

// DecodeValid decodes data with decode (Decode, for a document of any kind, or one
// kind's Decode function) and validates the document: what is wrong is the error, one
// ErrorList with both the decoding problems (unknown fields, values of the wrong type) and
// the problems Validate finds in the rest of the document, sorted by field path.
func DecodeValid[D interface{ Validate() ErrorList }](data []byte, decode func([]byte) (D, error)) (D, error) {
	doc, err := decode(data)
	if list, ok := errors.AsType[ErrorList](err); ok {
		// Values of the wrong type: validate the rest too, so that every problem is
		// reported at once (decode_all.go).
		err = withSemanticErrors(data, list, decode)
	} else if err == nil {
		err = doc.Validate().Err()
	}
	if err != nil {
		var none D
		return none, err
	}
	return doc, nil
}

// Decode reads one YAML or JSON document of any kind, strictly: unknown fields, values of
// the wrong type and duplicate keys are all reported, with their field paths, as an
// ErrorList. It then applies Default. It does not call Validate.
//
// Problems without a field path wrap ErrDocumentTooLarge or ErrInvalidDocument.
func Decode(data []byte) (Object, error) {
	doc, jsonData, err := parse(data)
	if err != nil {
		return nil, err
	}
	kindPath := NewPath("kind")
	kindValue, ok := doc["kind"]
	if !ok || kindValue == nil {
		return nil, ErrorList{Invalid(kindPath, "required; must be one of %s", joinKinds())}
	}
	kind, ok := kindValue.(string)
	if !ok {
		return nil, ErrorList{Invalid(kindPath, "must be a string")}
	}
	obj := NewObject(Kind(kind))
	if obj == nil {
		return nil, ErrorList{Invalid(kindPath, "must be one of %s", joinKinds())}
	}
	if err := decodeInto(doc, jsonData, obj, nil); err != nil {
		return nil, err
	}
	return obj, nil
}

// DecodeTrainingJob is Decode for a document that must be a TrainingJob.
func DecodeTrainingJob(data []byte) (*TrainingJob, error) {
	return decodeAs[TrainingJob](data, KindTrainingJob)
}

func joinKinds() string {
	ks := Kinds()
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// decodeAs is Decode for a document that must be of kind k, into a new T.
func decodeAs[T any, P interface {
	*T
	Object
}](data []byte, k Kind) (*T, error) {
	doc, jsonData, err := parse(data)
	if err != nil {
		return nil, err
	}
	var errs ErrorList
	if v, ok := doc["kind"]; !ok || v == nil {
		errs = append(errs, Invalid(NewPath("kind"), "required; must be %s", k))
	} else if s, ok := v.(string); ok && s != string(k) {
		// A kind that is not a string is reported by checkTypes.
		errs = append(errs, Invalid(NewPath("kind"), "must be %s", k))
	}
	obj := new(T)
	if err := decodeInto(doc, jsonData, P(obj), errs); err != nil {
		return nil, err
	}
	return obj, nil
}

// decodeInto checks doc against obj's type, then unmarshals and defaults obj. errs are
// problems the caller already found.
func decodeInto(doc map[string]any, jsonData []byte, obj Object, errs ErrorList) error {
	errs = append(errs, checkTypes(doc, obj)...)
	if len(errs) > 0 {
		errs.Sort()
		return errs
	}
	if err := json.Unmarshal(jsonData, obj); err != nil {
		// checkTypes should have caught everything encoding/json rejects; this is a
		// fallback that still names the field where it can.
		return ErrorList{unmarshalError(err)}
	}
	obj.Default()
	return nil
}

// unmarshalError turns an encoding/json error into a FieldError.
func unmarshalError(err error) *FieldError {
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return &FieldError{Field: te.Field, Detail: "must be " + describeKind(te.Type)}
	}
	return &FieldError{Detail: err.Error()}
}

// parse checks the size, turns YAML into JSON, and returns the document as a generic
// JSON object together with its JSON encoding.
func parse(data []byte) (map[string]any, []byte, error) {
	if len(data) > MaxDocumentSize {
		return nil, nil, fmt.Errorf("%w: %d bytes; the limit is %d bytes (1 MiB)",
			ErrDocumentTooLarge, len(data), MaxDocumentSize)
	}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, nil, fmt.Errorf("%w: the document is empty", ErrInvalidDocument)
	}

	jsonData := data
	var v any
	if looksLikeJSON(trimmed) {
		var dups ErrorList
		var err error
		if v, dups, err = parseJSON(data); err != nil {
			return nil, nil, err
		}
		if len(dups) > 0 {
			dups.Sort()
			return nil, nil, dups
		}
	} else {
		converted, err := yamlToJSON(data)
		if err != nil {
			return nil, nil, err
		}
		jsonData = converted
		if v, _, err = parseJSON(jsonData); err != nil {
			return nil, nil, err
		}
	}

	doc, ok := v.(map[string]any)
	if !ok {
		if v == nil {
			return nil, nil, fmt.Errorf("%w: the document is empty", ErrInvalidDocument)
		}
		return nil, nil, fmt.Errorf("%w: the document must be an object (a mapping of field names to values), not %s",
			ErrInvalidDocument, describeValue(v))
	}
	return doc, jsonData, nil
}

// looksLikeJSON reports whether a document is meant as JSON: an object whose first key is
// quoted, or an empty object. Other documents, including YAML flow mappings such as
// "{kind: TrainingJob}", are read as YAML.
func looksLikeJSON(trimmed []byte) bool {
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return false
	}
	rest := bytes.TrimSpace(trimmed[1:])
	return len(rest) > 0 && (rest[0] == '"' || rest[0] == '}')
}

// yamlToJSON converts one YAML document to JSON, reporting duplicate keys with their field
// paths.
func yamlToJSON(data []byte) ([]byte, error) {
	// yaml.v3's node tree gives the paths and lines that sigs.k8s.io/yaml's strict mode
	// does not, and shows whether there is more than one document.
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	docs := 0
	var dups ErrorList
	for {
		var n yamlv3.Node
		if err := dec.Decode(&n); err != nil {
			// io.EOF, or a syntax error that the conversion below reports.
			break
		}
		if len(n.Content) > 0 && !(n.Content[0].Kind == yamlv3.ScalarNode && n.Content[0].Tag == "!!null") {
			docs++
		}
		if err := checkYAMLBounds(&n); err != nil {
			return nil, err
		}
		findDuplicateKeys(&n, "", 0, &dups)
	}
	if len(dups) > 0 {
		dups.Sort()
		return nil, dups
	}
	if docs > 1 {
		return nil, fmt.Errorf("%w: found %d YAML documents; submit one at a time", ErrInvalidDocument, docs)
	}
	out, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		msg = strings.ReplaceAll(msg, "\n ", "")
		return nil, fmt.Errorf("%w: %s", ErrInvalidDocument, msg)
	}
	return out, nil
}

// findDuplicateKeys reports every key that repeats within a mapping.
func findDuplicateKeys(n *yamlv3.Node, p Path, depth int, errs *ErrorList) {
	if depth > maxDepth {
		return
	}
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			findDuplicateKeys(c, p, depth+1, errs)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			findDuplicateKeys(c, p.Index(i), depth+1, errs)
		}
	case yamlv3.MappingNode:
		first := map[string]*yamlv3.Node{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := p.Key(k.Value)
			if f, ok := first[k.Value]; ok && k.Kind == yamlv3.ScalarNode {
				*errs = append(*errs, duplicateKey(kp, k.Line, k.Column, f.Line, f.Column))
			} else {
				first[k.Value] = k
			}
			findDuplicateKeys(v, kp, depth+1, errs)
		}
	}
	// Aliases are not followed: their anchors were checked where they were defined.
}

// duplicateKey reports a key set twice in one object, with where each was set.
func duplicateKey(p Path, line, col, firstLine, firstCol int) *FieldError {
	if line == firstLine {
		return Invalid(p, "duplicate key at line %d, column %d (first at column %d)", line, col, firstCol)
	}
	return Invalid(p, "duplicate key at line %d (first at line %d)", line, firstLine)
}

// parseJSON decodes one JSON value into generic values (objects as map[string]any, numbers
// as json.Number), reporting duplicate keys with their field paths.
func parseJSON(data []byte) (any, ErrorList, error) {
	p := &jsonParser{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	p.dec.UseNumber()
	v, err := p.value("", 0)
	if err != nil {
		return nil, nil, p.syntaxError(err)
	}
	end := p.dec.InputOffset()
	if _, err := p.dec.Token(); err != io.EOF {
		rest := data[end:]
		end += int64(len(rest) - len(bytes.TrimLeft(rest, " \t\r\n")))
		return nil, nil, fmt.Errorf("%w: unexpected data after the top-level object at %s",
			ErrInvalidDocument, p.position(end))
	}
	return v, p.dups, nil
}

type jsonParser struct {
	data []byte
	dec  *json.Decoder
	dups ErrorList
}

func (p *jsonParser) value(path Path, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errTooDeep
	}
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		m := map[string]any{}
		keyAt := map[string]int64{}
		for p.dec.More() {
			kt, err := p.dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string) // Token only returns strings in key position.
			// InputOffset is just past the key; point at its opening quote instead.
			at := int64(bytes.LastIndexByte(p.data[:max(p.dec.InputOffset()-1, 0)], '"'))
			if first, dup := keyAt[k]; dup {
				l, c := p.lineCol(at)
				fl, fc := p.lineCol(first)
				p.dups = append(p.dups, duplicateKey(path.Key(k), l, c, fl, fc))
			} else {
				keyAt[k] = at
			}
			v, err := p.value(path.Key(k), depth+1)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		_, err := p.dec.Token() // '}'
		return m, err
	case json.Delim('['):
		l := []any{}
		for i := 0; p.dec.More(); i++ {
			v, err := p.value(path.Index(i), depth+1)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		_, err := p.dec.Token() // ']'
		return l, err
	}
	return tok, nil
}

// syntaxError adds a line and column to a JSON syntax error.
func (p *jsonParser) syntaxError(err error) error {
	if errors.Is(err, errTooDeep) {
		return fmt.Errorf("%w: %w", ErrInvalidDocument, err)
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return fmt.Errorf("%w: invalid JSON at %s: %w", ErrInvalidDocument, p.position(se.Offset), se)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: invalid JSON: unexpected end of document", ErrInvalidDocument)
	}
	return fmt.Errorf("%w: invalid JSON: %w", ErrInvalidDocument, err)
}

// position turns a byte offset into "line L, column C".
func (p *jsonParser) position(offset int64) string {
	line, col := p.lineCol(offset)
	return fmt.Sprintf("line %d, column %d", line, col)
}

// lineCol turns a byte offset into a line and a column, both from 1.
func (p *jsonParser) lineCol(offset int64) (line, col int) {
	before := p.data[:min(int(offset), len(p.data))]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}
