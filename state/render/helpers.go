package render

import (
	"sort"
	"strings"

	"github.com/aymerick/raymond"
)

// indentHelperFunc renders `{{> indent content=P}}` after rewriting: the
// value of P with every line after the first prefixed by indent, the
// leading whitespace of the tag's line
// (swdd~config-renderer-supports-rendering-with-keeping-line-indent~1).
func indentHelperFunc(indent string, options *raymond.Options) raymond.SafeString {
	return raymond.SafeString(indentValue(raymond.Str(options.HashProp("content")), indent))
}

// indentValue prefixes every line of value after the first with indent. A
// final line break gets no prefix, so that it leaves no line holding only
// the indent behind.
func indentValue(value, indent string) string {
	if indent == "" || !strings.Contains(value, "\n") {
		return value
	}
	body, trailing := strings.CutSuffix(value, "\n")
	out := strings.ReplaceAll(body, "\n", "\n"+indent)
	if trailing {
		out += "\n"
	}
	return out
}

// sortedEach replaces raymond's each for our templates. raymond walks a
// map in Go's random map order; this one walks it in key order, so the
// same config always renders to the same text and the same instance id.
// Lists and @index/@key/@first/@last behave as in raymond.
func sortedEach(value any, options *raymond.Options) string {
	if !raymond.IsTrue(value) {
		return options.Inverse()
	}
	var b strings.Builder
	switch v := value.(type) {
	case []any:
		for i, e := range v {
			b.WriteString(options.FnCtxData(e, iterFrame(options, i, len(v), nil)))
		}
	case map[string]any:
		for i, k := range sortedKeys(v) {
			b.WriteString(options.FnCtxData(v[k], iterFrame(options, i, len(v), k)))
		}
	}
	return b.String()
}

func iterFrame(options *raymond.Options, i, n int, key any) *raymond.DataFrame {
	f := options.NewDataFrame()
	f.Set("index", i)
	f.Set("key", key)
	f.Set("first", i == 0)
	f.Set("last", i == n-1)
	return f
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
