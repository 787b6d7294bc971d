package schemas

import (
	"fmt"

	yamlv3 "gopkg.in/yaml.v3"
)

// MaxExpandedSize bounds what a YAML document amounts to once its aliases are
// expanded, in bytes of scalar values plus one per node (2 MiB). A document without
// aliases is always smaller than its text, so only alias expansion (a "billion
// laughs" document) can reach it.
const MaxExpandedSize = 2 * MaxDocumentSize

// yamlBounds measures a YAML node tree as the conversion to JSON would expand it,
// following aliases, and refuses it when it is nested more than maxDepth levels deep
// or expands to more than MaxExpandedSize. Each anchored node is measured once, so
// the check costs one pass over the tree whatever the aliases multiply to.
type yamlBounds struct {
	// size and height are the measures of anchored nodes already measured.
	size   map[*yamlv3.Node]int
	height map[*yamlv3.Node]int
}

// checkYAMLBounds is the pre-pass of yamlToJSON over one document's node tree.
func checkYAMLBounds(doc *yamlv3.Node) error {
	b := &yamlBounds{size: map[*yamlv3.Node]int{}, height: map[*yamlv3.Node]int{}}
	root := doc
	if doc.Kind == yamlv3.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		root = doc.Content[0]
	}
	size, _, err := b.measure(root, 0)
	if err != nil {
		return err
	}
	if size > MaxExpandedSize {
		return expansionError()
	}
	return nil
}

func expansionError() error {
	return fmt.Errorf("%w: YAML aliases expand the document to more than %d bytes (2 MiB); write the values out or use fewer aliases",
		ErrInvalidDocument, MaxExpandedSize)
}

// measure returns the expanded size and height of n at the given depth. An alias
// measures as its anchor: a cycle (an alias inside its own anchor) is refused as too
// deep, since it never ends.
func (b *yamlBounds) measure(n *yamlv3.Node, depth int) (size, height int, err error) {
	if depth > maxDepth {
		return 0, 0, fmt.Errorf("%w: %w (line %d)", ErrInvalidDocument, errTooDeep, n.Line)
	}
	if n.Kind == yamlv3.AliasNode {
		if n.Alias == nil {
			return 1, 0, nil
		}
		return b.measureAnchor(n.Alias, depth)
	}
	if n.Anchor != "" {
		return b.measureAnchor(n, depth)
	}
	return b.measureNode(n, depth)
}

// measureAnchor measures an anchored node once, and reuses its measures wherever an
// alias repeats it.
func (b *yamlBounds) measureAnchor(n *yamlv3.Node, depth int) (int, int, error) {
	if s, ok := b.size[n]; ok {
		if depth+b.height[n] > maxDepth {
			return 0, 0, fmt.Errorf("%w: %w (line %d)", ErrInvalidDocument, errTooDeep, n.Line)
		}
		return s, b.height[n], nil
	}
	s, h, err := b.measureNode(n, depth)
	if err != nil {
		return 0, 0, err
	}
	b.size[n], b.height[n] = s, h
	return s, h, nil
}

// measureNode measures n's own content, following its children.
func (b *yamlBounds) measureNode(n *yamlv3.Node, depth int) (size, height int, err error) {
	size = 1 + len(n.Value)
	for _, c := range n.Content {
		cs, ch, err := b.measure(c, depth+1)
		if err != nil {
			return 0, 0, err
		}
		size += cs
		height = max(height, ch+1)
		if size > MaxExpandedSize {
			return 0, 0, expansionError()
		}
	}
	return size, height, nil
}
