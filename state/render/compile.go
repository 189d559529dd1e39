package render

import (
	"fmt"
	"strings"

	"github.com/aymerick/raymond"
	"github.com/aymerick/raymond/ast"
	"github.com/aymerick/raymond/lexer"
	"github.com/aymerick/raymond/parser"
)

// indentHelper is the private helper that `{{> indent content=P}}` is
// rewritten to. `$` is a valid handlebars name but can never be a config
// alias, so it cannot shadow one.
const indentHelper = "$"

// template is one parsed template: raymond's executable form, the AST the
// strict check walks (a second parse of the same text, since raymond does
// not expose its own), and where the indent tags are.
type template struct {
	exec *raymond.Template
	prog *ast.Program
	// indents holds the byte positions, in the rewritten source, of the
	// mustaches that came from `{{> indent ...}}`.
	indents map[int]bool
}

// compile turns template source into a template, or reports why it cannot.
// It never starts raymond's parser on text the recogniser rejected.
func compile(src string) (t *template, err error) {
	defer func() {
		if p := recover(); p != nil {
			t, err = nil, errorf(0, "template parser failed: %v", p)
		}
	}()
	src, toks := bracketIndexSegments(src)
	rewritten, indents := rewrite(src, toks)
	if err := recognize(lexer.Collect(rewritten)); err != nil {
		return nil, err
	}
	prog, err := parser.Parse(rewritten)
	if err != nil {
		return nil, parserError(err)
	}
	exec, err := raymond.Parse(rewritten)
	if err != nil {
		return nil, parserError(err)
	}
	exec.RegisterHelper(indentHelper, indentHelperFunc)
	exec.RegisterHelper("each", sortedEach)
	return &template{exec: exec, prog: prog, indents: indents}, nil
}

// parserError reports a syntax error that the recogniser let through; it
// should not happen, and the fuzz test checks that it does not.
func parserError(err error) error {
	return &parserMismatch{msg: strings.ReplaceAll(err.Error(), "\n", " ")}
}

type parserMismatch struct{ msg string }

func (e *parserMismatch) Error() string { return "syntax error: " + e.msg }

// maxIndexPasses bounds the re-lexing done by bracketIndexSegments; a
// template needing more passes keeps its lexer error.
const maxIndexPasses = 64

// bracketIndexSegments makes list indexes in paths work. handlebars-rust
// reads `{{cfg.values.0}}` as the path cfg → values → 0, but raymond's
// lexer reads a segment that starts with a digit or '-' as a number, which
// its parser rejects (or, for `0.b`, fails to lex). Such a segment is
// rewritten to raymond's literal-segment form `[0]`, which means the same
// path. Only a number right after a path separator is touched; each pass
// re-lexes, because a lexer error stops the token stream.
func bracketIndexSegments(src string) (string, []lexer.Token) {
	for pass := 0; ; pass++ {
		toks := lexer.Collect(src)
		var starts []int
		for i := 1; i < len(toks); i++ {
			sep, seg := toks[i-1], toks[i]
			if sep.Kind == lexer.TokenSep && seg.Pos == sep.Pos+1 &&
				(seg.Kind == lexer.TokenNumber || seg.Kind == lexer.TokenError) &&
				isIndexStart(src[seg.Pos]) {
				starts = append(starts, seg.Pos)
			}
		}
		if len(starts) == 0 || pass == maxIndexPasses {
			return src, toks
		}
		var b strings.Builder
		b.Grow(len(src) + 2*len(starts))
		last := 0
		for _, start := range starts {
			end := start + segmentLen(src[start:])
			b.WriteString(src[last:start])
			b.WriteByte('[')
			b.WriteString(src[start:end])
			b.WriteByte(']')
			last = end
		}
		b.WriteString(src[last:])
		src = b.String()
	}
}

// segmentLen is the length of the name that starts s, by raymond's rule
// for identifier characters.
func segmentLen(s string) int {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(" \n\t!\"#%&'()*+,./;<=>@[\\]^`{|}~", s[i]) >= 0 {
			return i
		}
	}
	return len(s)
}

// rewrite makes every plain mustache unescaped (`{{x}}` becomes `{{&x}}`)
// and turns `{{> indent ...}}` into `{{$ "<indent>" ...}}`, where <indent>
// is the leading whitespace of the tag's source line. It works on lexer
// tokens, so text in comments and escaped `\{{` is left alone. It returns
// the new source and the positions of the indent mustaches in it.
func rewrite(src string, toks []lexer.Token) (string, map[int]bool) {
	var b strings.Builder
	b.Grow(len(src) + 16)
	indents := map[int]bool{}
	last := 0
	for i, tok := range toks {
		switch tok.Kind {
		case lexer.TokenOpen:
			if !strings.Contains(tok.Val, "&") {
				end := tok.Pos + len(tok.Val)
				b.WriteString(src[last:end])
				b.WriteByte('&')
				last = end
			}
		case lexer.TokenOpenPartial:
			if !isIndentPartial(toks, i) {
				continue
			}
			b.WriteString(src[last:tok.Pos])
			indents[b.Len()] = true
			// The indent holds only spaces and tabs, so it needs no quoting.
			fmt.Fprintf(&b, "%s%s \"%s\"", strings.TrimSuffix(tok.Val, ">"), indentHelper, lineIndent(src, tok.Pos))
			last = toks[i+1].Pos + len(toks[i+1].Val)
		}
	}
	b.WriteString(src[last:])
	return b.String(), indents
}

// isIndentPartial reports whether toks[i], an OPEN_PARTIAL, starts
// `{{> indent` (and not, say, `{{> indent.x`).
func isIndentPartial(toks []lexer.Token, i int) bool {
	if i+1 >= len(toks) || toks[i+1].Kind != lexer.TokenID || toks[i+1].Val != "indent" {
		return false
	}
	return i+2 >= len(toks) || toks[i+2].Kind != lexer.TokenSep
}

// lineIndent is the run of spaces and tabs that starts the line holding
// byte pos.
func lineIndent(src string, pos int) string {
	start := strings.LastIndexByte(src[:pos], '\n') + 1
	end := start
	for end < pos && (src[end] == ' ' || src[end] == '\t') {
		end++
	}
	return src[start:end]
}
