package render

import (
	"strings"

	"github.com/aymerick/raymond"
	"github.com/aymerick/raymond/ast"
)

// Limits on the work one template may cause. raymond would do the same
// work after the check, so the check is where it is cut off: a template
// that loops over a large config item is refused before raymond builds
// its output. The request's Budget bounds all its templates together.
const (
	// maxSteps bounds the steps of one template's check: elements
	// visited, counting every iteration, and the lookups of names (see
	// Budget).
	maxSteps = 1 << 18
	// DefaultMaxOutput is the most text one workload renders to when the
	// Renderer is given no limit.
	DefaultMaxOutput = 1 << 20
)

// raymondHelpers are the names raymond resolves as helpers rather than as
// paths: its global helpers plus the two each template registers.
var raymondHelpers = map[string]bool{
	"if": true, "unless": true, "with": true, "each": true,
	"log": true, "lookup": true, "equal": true, indentHelper: true,
}

// checker is the strict check: a walk of the template that visits exactly
// what raymond will visit, with the same values, and refuses every
// reference to something that does not exist. With out set it also writes
// the text raymond should produce, which the tests compare with raymond's.
type checker struct {
	t      *template
	ctx    []any            // context stack, as raymond's evalVisitor.ctx
	params []map[string]any // block parameter stack
	data   *frame           // current @-variable frame
	out    *strings.Builder // nil unless predicting the output
	size   int
	max    int // bytes of rendered text allowed
	steps  int
	budget *Budget // the request's; nil is none
}

// check runs the strict check of t against the root context; the
// output may be at most max bytes, and the work is taken from b.
func check(t *template, root map[string]any, out *strings.Builder, max int, b *Budget) error {
	c := &checker{t: t, ctx: []any{root}, data: &frame{data: map[string]any{}}, out: out, max: max, budget: b}
	return c.program(t.prog)
}

func (c *checker) step(line int) error { return c.charge(line, 1) }

// charge counts n steps of work about to be done against the template's
// limit and the request's budget.
func (c *checker) charge(line, n int) error {
	c.steps += n
	if c.steps > maxSteps {
		return errorf(line, "template takes more than %d steps to render", maxSteps)
	}
	return c.budget.charge(n)
}

func (c *checker) write(line int, s string) error {
	c.size += len(s)
	if c.size > c.max {
		return errorf(line, "rendered text is longer than the %d bytes left of the limit (max_workload_bytes)", c.max)
	}
	if err := c.budget.write(len(s)); err != nil {
		return err
	}
	if c.out != nil {
		c.out.WriteString(s)
	}
	return nil
}

func (c *checker) program(p *ast.Program) error {
	if p == nil {
		return nil
	}
	for _, n := range p.Body {
		if err := c.step(p.Line); err != nil {
			return err
		}
		var err error
		switch n := n.(type) {
		case *ast.ContentStatement:
			err = c.write(n.Line, n.Value)
		case *ast.CommentStatement:
		case *ast.MustacheStatement:
			err = c.mustache(n)
		case *ast.BlockStatement:
			err = c.block(n)
		case *ast.PartialStatement:
			err = errorf(n.Line, "partial '%s' is not supported; the only partial is {{> indent content=<path>}}", partialName(n))
		default:
			err = errorf(n.Location().Line, "unsupported template element %s", n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func partialName(n *ast.PartialStatement) string {
	if name, ok := ast.HelperNameStr(n.Name); ok {
		return name
	}
	return "(...)"
}

// evalProgram mirrors raymond's evalProgram: it runs a block's program
// with a new context (if not nil), block parameters and @-variables.
func (c *checker) evalProgram(p *ast.Program, ctx any, data *frame) error {
	if p == nil {
		return nil
	}
	if len(p.BlockParams) > 0 {
		c.params = append(c.params, map[string]any{p.BlockParams[0]: ctx})
		defer func() { c.params = c.params[:len(c.params)-1] }()
	}
	if ctx != nil {
		c.ctx = append(c.ctx, ctx)
		defer func() { c.ctx = c.ctx[:len(c.ctx)-1] }()
	}
	if data != nil {
		saved := c.data
		c.data = data
		defer func() { c.data = saved }()
	}
	return c.program(p)
}

func (c *checker) mustache(m *ast.MustacheStatement) error {
	e := m.Expression
	name := e.HelperName()
	switch {
	case name == indentHelper && c.t.indents[m.Pos]:
		return c.indent(m)
	case name == "lookup":
		return c.lookup(m)
	case raymondHelpers[name]:
		if name == "if" || name == "unless" || name == "each" || name == "with" {
			return errorf(m.Line, "'%s' must be used as a block: {{#%s ...}}...{{/%s}}", name, name, name)
		}
		return errorf(m.Line, "helper '%s' is not supported", name)
	}
	path, ok := e.Path.(*ast.PathExpression)
	if !ok {
		return errorf(m.Line, "a literal cannot be rendered on its own: %s", m.Expression.Canonical())
	}
	if len(e.Params) > 0 || e.Hash != nil {
		return errorf(m.Line, "'%s' is not a helper and takes no parameters", shown(path))
	}
	v, err := c.value(path)
	if err != nil {
		return err
	}
	s, err := scalar(m.Line, shown(path), v)
	if err != nil {
		return err
	}
	return c.write(m.Line, s)
}

// indent checks `{{> indent content=P}}`, rewritten by compile to
// `{{$ "<line indent>" content=P}}`.
func (c *checker) indent(m *ast.MustacheStatement) error {
	e := m.Expression
	if len(e.Params) != 1 || e.Hash == nil || len(e.Hash.Pairs) != 1 || e.Hash.Pairs[0].Key != "content" {
		return errorf(m.Line, "the indent partial takes exactly one argument: {{> indent content=<path>}}")
	}
	indent, ok := e.Params[0].(*ast.StringLiteral)
	if !ok {
		return errorf(m.Line, "malformed indent partial")
	}
	v, what, err := c.param(m.Line, e.Hash.Pairs[0].Val)
	if err != nil {
		return err
	}
	if v == nil {
		return missing(m.Line, what)
	}
	s, err := scalar(m.Line, what, v)
	if err != nil {
		return err
	}
	return c.write(m.Line, indentValue(s, indent.Value))
}

// lookup checks `{{lookup value key}}`, raymond's lookup helper.
func (c *checker) lookup(m *ast.MustacheStatement) error {
	e := m.Expression
	if len(e.Params) != 2 || e.Hash != nil {
		return errorf(m.Line, "lookup takes two parameters: {{lookup <value> <key>}}")
	}
	obj, objWhat, err := c.param(m.Line, e.Params[0])
	if err != nil {
		return err
	}
	if obj == nil {
		return missing(m.Line, objWhat)
	}
	key, keyWhat, err := c.param(m.Line, e.Params[1])
	if err != nil {
		return err
	}
	if key == nil {
		return missing(m.Line, keyWhat)
	}
	field, err := scalar(m.Line, keyWhat, key)
	if err != nil {
		return err
	}
	what := objWhat + "[" + field + "]"
	if !isSupported(obj) {
		return errorf(m.Line, "'%s': unsupported config value of type %T", objWhat, obj)
	}
	v, ok, negative := lookupField(obj, field)
	switch {
	case negative:
		return errorf(m.Line, "'%s': list index %s is negative", what, field)
	case !ok || v == nil || field == "":
		return missing(m.Line, what)
	}
	s, err := scalar(m.Line, what, v)
	if err != nil {
		return err
	}
	return c.write(m.Line, s)
}

func (c *checker) block(b *ast.BlockStatement) error {
	e := b.Expression
	name := e.HelperName()
	switch name {
	case "if", "unless", "each", "with":
	default:
		if raymondHelpers[name] {
			return errorf(b.Line, "helper '%s' cannot be used as a block", name)
		}
		return errorf(b.Line, "block {{#%s}} is not supported; blocks are #if, #unless, #each and #with", e.Canonical())
	}
	if len(e.Params) != 1 || e.Hash != nil {
		return errorf(b.Line, "#%s takes exactly one parameter", name)
	}
	v, what, err := c.param(b.Line, e.Params[0])
	if err != nil {
		return err
	}
	switch name {
	case "if", "unless":
		// A missing condition is false, as in handlebars-rust.
		if raymond.IsTrue(v) == (name == "if") {
			return c.evalProgram(b.Program, nil, nil)
		}
		return c.program(b.Inverse)
	}
	if v == nil {
		if b.Inverse != nil {
			return c.program(b.Inverse)
		}
		return missing(b.Line, what)
	}
	if !raymond.IsTrue(v) {
		return c.program(b.Inverse)
	}
	if name == "with" {
		return c.evalProgram(b.Program, v, nil)
	}
	return c.each(b, what, v)
}

// each mirrors sortedEach.
func (c *checker) each(b *ast.BlockStatement, what string, v any) error {
	switch x := v.(type) {
	case []any:
		for i, e := range x {
			if err := c.iterate(b, e, i, len(x), nil); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		// Sorting the keys is work too, done on every visit.
		if err := c.charge(b.Line, len(x)); err != nil {
			return err
		}
		for i, k := range sortedKeys(x) {
			if err := c.iterate(b, x[k], i, len(x), k); err != nil {
				return err
			}
		}
		return nil
	}
	return errorf(b.Line, "#each needs a list or a map, but '%s' is %s", what, kind(v))
}

func (c *checker) iterate(b *ast.BlockStatement, elem any, i, n int, key any) error {
	if err := c.step(b.Line); err != nil {
		return err
	}
	return c.evalProgram(b.Program, elem, &frame{parent: c.data, iter: true, index: i, n: n, key: key})
}

// param evaluates a helper parameter as raymond does, and names it for
// messages. A nil value means it names nothing.
func (c *checker) param(line int, n ast.Node) (any, string, error) {
	switch n := n.(type) {
	case *ast.PathExpression:
		v, err := c.resolve(n)
		return v, shown(n), err
	case *ast.StringLiteral:
		return n.Value, n.Value, nil
	case *ast.BooleanLiteral:
		return n.Value, n.Canonical(), nil
	case *ast.NumberLiteral:
		return n.Number(), n.Canonical(), nil
	}
	return nil, "", errorf(line, "sub-expressions are not supported")
}

// value resolves a path that must name something.
func (c *checker) value(path *ast.PathExpression) (any, error) {
	v, err := c.resolve(path)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, missing(path.Line, shown(path))
	}
	return v, nil
}

func missing(line int, what string) error {
	return errorf(line, "'%s' does not exist", what)
}

// scalar gives the text raymond renders for v, refusing lists and maps,
// which have no sensible text form.
func scalar(line int, what string, v any) (string, error) {
	switch v.(type) {
	case string, bool, int, float64:
		return raymond.Str(v), nil
	}
	return "", errorf(line, "'%s' is %s, not a single value", what, kind(v))
}

func kind(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	case string:
		return "a string"
	case bool, int, float64:
		return "a scalar"
	}
	return "an unsupported value"
}
