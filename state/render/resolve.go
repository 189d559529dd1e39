package render

import (
	"strconv"
	"strings"

	"github.com/aymerick/raymond/ast"
)

// This file resolves path expressions the way raymond v2.0.2 does (see
// evalPathExpression and friends in its eval.go), for the values a config
// context can hold: string, []any, map[string]any, and the ints, bools and
// float64s of @-variables and literals. Keeping the rules identical is what
// lets the strict check vouch for raymond's run: a path the check resolves
// is a path raymond resolves to the same value.
//
// Where raymond would panic or do something surprising, resolution fails
// with a hard error instead: a negative list index panics in reflect, a
// path looked up against a list context is mapped over its elements, and
// an @-variable without a name indexes an empty slice.

// frame mirrors raymond's DataFrame: the @-variables of one #each level.
// raymond copies its parent's variables into each iteration's frame and
// sets index, key, first and last; here an iteration's frame holds only
// those and builds the map when a template reads an @-variable, which
// most iterations never do.
type frame struct {
	parent *frame
	data   map[string]any
	// iter marks an #each iteration's frame, whose data is built from
	// the parent's and these on first use.
	iter     bool
	index, n int
	key      any
}

// values is the frame's @-variables, as raymond's DataFrame holds them.
func (f *frame) values() map[string]any {
	if f.iter && f.data == nil {
		parent := f.parent.values()
		f.data = make(map[string]any, len(parent)+4)
		for k, v := range parent {
			f.data[k] = v
		}
		f.data["index"], f.data["key"], f.data["first"], f.data["last"] = f.index, f.key, f.index == 0, f.index == f.n-1
	}
	return f.data
}

// lookupField mirrors raymond's evalField: one path segment against one
// value. ok is false when the segment does not resolve.
func lookupField(v any, name string) (value any, ok bool, negative bool) {
	switch x := v.(type) {
	case map[string]any:
		value, ok = x[name]
		return value, ok, false
	case []any:
		i, err := strconv.Atoi(name)
		if err != nil || i >= len(x) {
			return nil, false, false
		}
		if i < 0 {
			return nil, false, true
		}
		return x[i], true, false
	}
	return nil, false, false
}

// evalPath mirrors raymond's evalPath: all parts against one value. valid
// is false when some part did not resolve; resolved tells whether at least
// the first one did.
func (c *checker) evalPath(node *ast.PathExpression, v any, parts []string) (value any, valid, resolved bool, err error) {
	for _, part := range parts {
		if err := c.charge(node.Line, 1); err != nil {
			return nil, false, resolved, err
		}
		if len(part) >= 2 && part[0] == '[' && part[len(part)-1] == ']' {
			part = part[1 : len(part)-1]
		}
		if !isSupported(v) {
			return nil, false, resolved, errorf(node.Line, "'%s': unsupported config value of type %T", shown(node), v)
		}
		next, ok, negative := lookupField(v, part)
		if negative {
			return nil, false, resolved, errorf(node.Line, "'%s': list index %s is negative", shown(node), part)
		}
		if !ok {
			return nil, false, resolved, nil
		}
		v, resolved = next, true
	}
	return v, true, resolved, nil
}

// evalCtxPath mirrors raymond's evalCtxPath. raymond maps a path over the
// elements of a list context; that is refused here unless the path is
// `this` alone, which yields the list itself.
func (c *checker) evalCtxPath(node *ast.PathExpression, ctx any, parts []string) (any, bool, error) {
	if list, ok := ctx.([]any); ok {
		if len(parts) > 0 {
			return nil, false, errorf(node.Line, "'%s' is looked up in a list; use an index such as 'list.0' or iterate with #each", shown(node))
		}
		return list, false, nil
	}
	value, valid, resolved, err := c.evalPath(node, ctx, parts)
	if err != nil || !valid {
		return nil, resolved, err
	}
	return value, resolved, nil
}

// evalDepthPath mirrors raymond's evalDepthPath: starting depth levels up
// the context stack, it tries each enclosing context until one resolves
// the first part of the path.
func (c *checker) evalDepthPath(node *ast.PathExpression, depth int, parts []string) (any, error) {
	var result any
	resolved := false
	for result == nil && !resolved && depth <= len(c.ctx)-1 {
		if err := c.charge(node.Line, 1); err != nil {
			return nil, err
		}
		var err error
		result, resolved, err = c.evalCtxPath(node, c.ctx[len(c.ctx)-1-depth], parts)
		if err != nil {
			return nil, err
		}
		if !resolved && result == nil {
			depth++
		}
	}
	return result, nil
}

// evalCtxPathExpression mirrors raymond's function of the same name.
func (c *checker) evalCtxPathExpression(node *ast.PathExpression) (any, error) {
	if node.IsDataRoot() {
		result, _, err := c.evalCtxPath(node, c.ctx[0], node.Parts[1:])
		return result, err
	}
	return c.evalDepthPath(node, node.Depth, node.Parts)
}

// evalDataPathExpression mirrors raymond's function of the same name.
func (c *checker) evalDataPathExpression(node *ast.PathExpression) (any, error) {
	if err := c.charge(node.Line, node.Depth); err != nil {
		return nil, err
	}
	f := c.data
	for i := node.Depth; i > 0; i-- {
		if f.parent == nil {
			return nil, nil
		}
		f = f.parent
	}
	result, _, err := c.evalCtxPath(node, f.values(), node.Parts)
	return result, err
}

// blockParam mirrors raymond's blockParam lookup: the innermost block
// parameter of that name wins, and a nil one counts as absent.
func (c *checker) blockParam(node *ast.PathExpression) (string, any, error) {
	if len(node.Parts) == 0 {
		return "", nil, nil
	}
	if err := c.charge(node.Line, len(c.params)); err != nil {
		return "", nil, err
	}
	name := node.Parts[0]
	for i := len(c.params) - 1; i >= 0; i-- {
		if v, ok := c.params[i][name]; ok {
			return name, v, nil
		}
	}
	return "", nil, nil
}

// resolve mirrors raymond's evalPathExpression. A nil result means the
// path names nothing.
func (c *checker) resolve(node *ast.PathExpression) (any, error) {
	if node.Data && len(node.Parts) == 0 {
		return nil, errorf(node.Line, "'%s' is not a valid @-variable", shown(node))
	}
	name, v, err := c.blockParam(node)
	if err != nil {
		return nil, err
	}
	if v != nil {
		c.ctx = append(c.ctx, map[string]any{name: v})
		result, err := c.evalCtxPathExpression(node)
		c.ctx = c.ctx[:len(c.ctx)-1]
		return result, err
	}
	var result any
	tried := false
	if node.IsDataRoot() {
		if result, err = c.evalCtxPathExpression(node); err != nil {
			return nil, err
		}
		tried = true
	}
	if result == nil && node.Data {
		if result, err = c.evalDataPathExpression(node); err != nil {
			return nil, err
		}
	}
	if result == nil && !tried {
		return c.evalCtxPathExpression(node)
	}
	return result, nil
}

// isSupported reports whether v is a value the resolver knows how raymond
// treats. Anything else could carry methods, which raymond would call.
func isSupported(v any) bool {
	switch v.(type) {
	case nil, string, []any, map[string]any, bool, int, float64:
		return true
	}
	return false
}

// shown is a path as the user wrote it: compile turned index segments
// such as `.0` into `.[0]`, which is turned back here for messages.
func shown(node *ast.PathExpression) string {
	s := node.Original
	var b strings.Builder
	for {
		i := strings.Index(s, "[")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "]")
		if j < 0 || i == 0 || (s[i-1] != '.' && s[i-1] != '/') || i+1 >= len(s) || !isIndexStart(s[i+1]) {
			b.WriteString(s[:i+1])
			s = s[i+1:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString(s[i+1 : i+j])
		s = s[i+j+1:]
	}
	b.WriteString(s)
	return b.String()
}

func isIndexStart(c byte) bool { return c == '-' || c >= '0' && c <= '9' }
