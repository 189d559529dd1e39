package render

import (
	"errors"
	"strings"
)

// Budget is what one request may spend on rendering, all its workloads
// and templates together: render steps and bytes of rendered text. The
// leader renders a request's workloads on its loop (a dry-run on another
// goroutine), so the budget bounds how long one request can hold it;
// the per-template limits (maxSteps, the output limit) bound one
// template only, and a request may carry a thousand.
//
// A render step is a unit of work counted before it is done, so that a
// request over its budget stops where it runs out and never renders in
// full:
//
//   - parsing a template: compileCost, charged once per distinct source
//     in the request before it is parsed (or taken from the cache, so
//     that the outcome does not depend on what the cache holds);
//   - checking it (check.go): one step per element visited, per #each
//     iteration (an #each over n items inside one over m costs m×n), per
//     key of a map an #each sorts, and per context, block parameter
//     frame and path segment a name lookup walks.
//
// raymond then executes a checked template with the same work, so the
// steps bound it too. One step is about a microsecond on a 2-core
// vehicle computer (BenchmarkRenderBudgetShapes measures the worst
// shapes). A Budget is used by one goroutine.
type Budget struct {
	maxSteps, steps int // 0: no limit
	maxBytes, bytes int
	// compiled holds the sources already charged for parsing.
	compiled map[string]bool
	// spent says a render ran out of the budget.
	spent bool
}

// NewBudget is a budget of maxSteps render steps and maxBytes bytes of
// rendered text; zero or less is no limit.
func NewBudget(maxSteps, maxBytes int) *Budget {
	return &Budget{maxSteps: max(maxSteps, 0), maxBytes: max(maxBytes, 0), compiled: map[string]bool{}}
}

// Steps is the render steps spent so far.
func (b *Budget) Steps() int {
	if b == nil {
		return 0
	}
	return b.steps
}

// Spent reports whether a render ran out of the budget: what the request
// renders next would run out too.
func (b *Budget) Spent() bool { return b != nil && b.spent }

// Budget errors, turned into a state.BudgetError naming the field by
// Renderer.field.
var (
	errOutOfSteps = errors.New("out of render steps")
	errOutOfBytes = errors.New("out of rendered bytes")
)

// charge takes n steps, or reports that the budget ran out.
func (b *Budget) charge(n int) error {
	if b == nil {
		return nil
	}
	b.steps += n
	if b.maxSteps > 0 && b.steps > b.maxSteps {
		b.spent = true
		return errOutOfSteps
	}
	return nil
}

// write takes n bytes of rendered text, or reports that the budget ran
// out.
func (b *Budget) write(n int) error {
	if b == nil {
		return nil
	}
	b.bytes += n
	if b.maxBytes > 0 && b.bytes > b.maxBytes {
		b.spent = true
		return errOutOfBytes
	}
	return nil
}

// compile charges the parsing of src, once per request.
func (b *Budget) compile(src string) error {
	if b == nil || b.compiled[src] {
		return nil
	}
	b.compiled[src] = true
	return b.charge(compileCost(src))
}

// Weights of compileCost, in render steps, measured against raymond
// v2.0.2 (BenchmarkRenderBudgetShapes): its lexer runs as a goroutine
// handing over one token at a time and tries a dozen regular
// expressions at every token, so a byte inside a tag costs about six
// times one outside, and each tag a fixed amount on top.
const (
	costOutsidePerThreeBytes = 1 // text between tags
	costInsidePerByte        = 2 // text inside a tag
	costPerTag               = 8
	// compile lexes the source once per pass of bracketIndexSegments,
	// then once for the recogniser and once each for the two parses,
	// which cost about a lexing more.
	lexingsAfterIndexPasses = 4
)

// compileCost is the render steps parsing src costs: a lexing's cost
// times the number of lexings compile may do. It is computed from the
// text before anything is parsed, and errs on the high side: the
// passes that rewrite list indexes are counted as if every index
// segment needed one.
func compileCost(src string) int {
	if !strings.Contains(src, "{{") {
		return 0 // render returns such text as it is
	}
	inside, tags, indexes := 0, 0, 0
	for rest := src; ; {
		i := strings.Index(rest, "{{")
		if i < 0 {
			break
		}
		tags++
		rest = rest[i+2:]
		j := strings.Index(rest, "}}")
		if j < 0 {
			j = len(rest)
		}
		tag := rest[:j]
		inside += len(tag)
		indexes += indexSegments(tag)
		rest = rest[j:]
	}
	lexing := (len(src)-inside+2)/3*costOutsidePerThreeBytes + inside*costInsidePerByte + tags*costPerTag
	passes := 1 + min(indexes, maxIndexPasses)
	return (passes + lexingsAfterIndexPasses) * lexing
}

// indexSegments counts the segments of tag that start with a digit or
// '-' after a path separator: each may cost bracketIndexSegments a pass.
func indexSegments(tag string) int {
	n := 0
	for i := 1; i < len(tag); i++ {
		if (tag[i-1] == '.' || tag[i-1] == '/') && isIndexStart(tag[i]) {
			n++
		}
	}
	return n
}
