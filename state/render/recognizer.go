package render

import (
	"strconv"
	"strings"

	"github.com/aymerick/raymond/lexer"
)

// maxNesting bounds how deeply blocks and sub-expressions may nest, which
// bounds the recursion of raymond's parser and of the strict check.
const maxNesting = 64

// maxPathSegments bounds the names of one path (`a.b.c`, `../x`):
// raymond's parser builds a path's text anew for every segment, so its
// work grows with the square of their number (a 64 KiB path of 32,768
// segments took 7 s), and the strict check walks them on every lookup.
// No config nests deeper than max_config_depth (32 by default), and
// `../` cannot climb more than maxNesting levels.
const maxPathSegments = 128

// recognizer checks a token stream against the grammar of raymond's parser
// without building anything. raymond's parser pulls tokens from a lexer
// goroutine and abandons it, blocked, on a syntax error; recognising the
// fully lexed tokens first means the parser is only run on templates it
// accepts, so no goroutine is ever left behind.
//
// The rules mirror parser/parser.go of raymond v2.0.2 production by
// production, with one restriction: raw blocks are rejected.
type recognizer struct {
	toks []lexer.Token // ends with TokenEOF
	i    int
}

// recognize reports the first syntax error of toks, or nil.
func recognize(toks []lexer.Token) error {
	if len(toks) == 0 {
		return errorf(0, "empty token stream")
	}
	if last := toks[len(toks)-1]; last.Kind == lexer.TokenError {
		return errorf(last.Line, "syntax error: %s", last.Val)
	}
	r := &recognizer{toks: toks}
	if err := r.program(0); err != nil {
		return err
	}
	if tok := r.next(); tok.Kind != lexer.TokenEOF {
		return r.unexpected(tok)
	}
	return nil
}

func (r *recognizer) peek(k int) lexer.Token {
	if r.i+k < len(r.toks) {
		return r.toks[r.i+k]
	}
	return r.toks[len(r.toks)-1]
}

func (r *recognizer) next() lexer.Token { return r.peek(0) }

func (r *recognizer) shift() lexer.Token {
	tok := r.next()
	if r.i < len(r.toks) {
		r.i++
	}
	return tok
}

func (r *recognizer) is(kind lexer.TokenKind) bool { return r.next().Kind == kind }

func (r *recognizer) expect(kind lexer.TokenKind, what string) error {
	tok := r.shift()
	if tok.Kind != kind {
		return errorf(tok.Line, "syntax error: expected %s, found %s", what, describe(tok))
	}
	return nil
}

func (r *recognizer) unexpected(tok lexer.Token) error {
	return errorf(tok.Line, "syntax error: unexpected %s", describe(tok))
}

func describe(tok lexer.Token) string {
	if tok.Kind == lexer.TokenEOF {
		return "end of template"
	}
	return strconv.Quote(tok.Val)
}

func isStatementStart(kind lexer.TokenKind) bool {
	switch kind {
	case lexer.TokenOpen, lexer.TokenOpenUnescaped, lexer.TokenOpenBlock,
		lexer.TokenOpenInverse, lexer.TokenOpenRawBlock, lexer.TokenOpenPartial,
		lexer.TokenContent, lexer.TokenComment:
		return true
	}
	return false
}

// program : statement*
func (r *recognizer) program(depth int) error {
	for isStatementStart(r.next().Kind) {
		if err := r.statement(depth); err != nil {
			return err
		}
	}
	return nil
}

func (r *recognizer) statement(depth int) error {
	tok := r.next()
	switch tok.Kind {
	case lexer.TokenOpen, lexer.TokenOpenUnescaped:
		return r.mustache(depth)
	case lexer.TokenOpenBlock:
		return r.block(depth+1, false)
	case lexer.TokenOpenInverse:
		return r.block(depth+1, true)
	case lexer.TokenOpenRawBlock:
		return errorf(tok.Line, "raw blocks are not supported")
	case lexer.TokenOpenPartial:
		return r.partial(depth)
	}
	r.shift() // content or comment
	return nil
}

// mustache : OPEN expression CLOSE | OPEN_UNESCAPED expression CLOSE_UNESCAPED
func (r *recognizer) mustache(depth int) error {
	open := r.shift()
	closeKind, closeText := lexer.TokenClose, "'}}'"
	if open.Kind == lexer.TokenOpenUnescaped {
		closeKind, closeText = lexer.TokenCloseUnescaped, "'}}}'"
	}
	if _, err := r.expression(depth); err != nil {
		return err
	}
	return r.expect(closeKind, closeText)
}

// partial : OPEN_PARTIAL (helperName | sexpr) param* hash? CLOSE
func (r *recognizer) partial(depth int) error {
	r.shift()
	if r.is(lexer.TokenOpenSexpr) {
		if err := r.sexpr(depth + 1); err != nil {
			return err
		}
	} else if _, err := r.helperName(); err != nil {
		return err
	}
	if err := r.paramsHash(depth); err != nil {
		return err
	}
	return r.expect(lexer.TokenClose, "'}}'")
}

// block : openBlock program inverseChain? closeBlock
// block : openInverse program (INVERSE program)? closeBlock
func (r *recognizer) block(depth int, inverse bool) error {
	if depth > maxNesting {
		return errorf(r.next().Line, "blocks nest deeper than %d levels", maxNesting)
	}
	name, err := r.openBlock(depth)
	if err != nil {
		return err
	}
	if err := r.program(depth); err != nil {
		return err
	}
	switch {
	case inverse && r.is(lexer.TokenInverse):
		r.shift()
		if err := r.program(depth); err != nil {
			return err
		}
	case !inverse && (r.is(lexer.TokenInverse) || r.is(lexer.TokenOpenInverseChain)):
		if err := r.inverseChain(depth); err != nil {
			return err
		}
	}
	return r.closeBlock(name)
}

// inverseChain : openInverseChain program inverseChain? | INVERSE program
func (r *recognizer) inverseChain(depth int) error {
	for {
		if r.is(lexer.TokenInverse) {
			r.shift()
			return r.program(depth)
		}
		if depth++; depth > maxNesting {
			return errorf(r.next().Line, "else-if chain longer than %d", maxNesting)
		}
		if _, err := r.openBlock(depth); err != nil {
			return err
		}
		if err := r.program(depth); err != nil {
			return err
		}
		if !r.is(lexer.TokenInverse) && !r.is(lexer.TokenOpenInverseChain) {
			return nil
		}
	}
}

// openBlock : (OPEN_BLOCK | OPEN_INVERSE | OPEN_INVERSE_CHAIN) expression blockParams? CLOSE
func (r *recognizer) openBlock(depth int) (string, error) {
	r.shift()
	name, err := r.expression(depth)
	if err != nil {
		return "", err
	}
	if r.is(lexer.TokenOpenBlockParams) {
		r.shift()
		n := 0
		for r.is(lexer.TokenID) {
			r.shift()
			n++
		}
		if n == 0 {
			return "", r.expect(lexer.TokenID, "a block parameter name")
		}
		if err := r.expect(lexer.TokenCloseBlockParams, "'|'"); err != nil {
			return "", err
		}
	}
	return name, r.expect(lexer.TokenClose, "'}}'")
}

// closeBlock : OPEN_ENDBLOCK helperName CLOSE, with the opening name.
func (r *recognizer) closeBlock(open string) error {
	tok := r.next()
	if err := r.expect(lexer.TokenOpenEndBlock, "'{{/"+open+"}}'"); err != nil {
		return err
	}
	name, err := r.helperName()
	if err != nil {
		return err
	}
	if name != open {
		return errorf(tok.Line, "syntax error: {{/%s}} does not close {{#%s}}", name, open)
	}
	return r.expect(lexer.TokenClose, "'}}'")
}

// expression : helperName param* hash?; it returns the canonical name that
// raymond compares with the closing tag of a block.
func (r *recognizer) expression(depth int) (string, error) {
	name, err := r.helperName()
	if err != nil {
		return "", err
	}
	return name, r.paramsHash(depth)
}

func (r *recognizer) paramsHash(depth int) error {
	for r.isParam() {
		if err := r.param(depth); err != nil {
			return err
		}
	}
	for r.isHashSegment() {
		r.shift()
		r.shift()
		if err := r.param(depth); err != nil {
			return err
		}
	}
	return nil
}

func (r *recognizer) isHashSegment() bool {
	return r.peek(0).Kind == lexer.TokenID && r.peek(1).Kind == lexer.TokenEquals
}

func (r *recognizer) isParam() bool {
	switch r.next().Kind {
	case lexer.TokenOpenSexpr, lexer.TokenBoolean, lexer.TokenNumber,
		lexer.TokenString, lexer.TokenData, lexer.TokenID:
		return !r.isHashSegment()
	}
	return false
}

func (r *recognizer) param(depth int) error {
	if r.is(lexer.TokenOpenSexpr) {
		return r.sexpr(depth + 1)
	}
	_, err := r.helperName()
	return err
}

// sexpr : OPEN_SEXPR expression CLOSE_SEXPR
func (r *recognizer) sexpr(depth int) error {
	if depth > maxNesting {
		return errorf(r.next().Line, "sub-expressions nest deeper than %d levels", maxNesting)
	}
	r.shift()
	if _, err := r.expression(depth); err != nil {
		return err
	}
	return r.expect(lexer.TokenCloseSexpr, "')'")
}

// helperName : path | dataName | STRING | NUMBER | BOOLEAN
func (r *recognizer) helperName() (string, error) {
	tok := r.next()
	switch tok.Kind {
	case lexer.TokenBoolean:
		r.shift()
		if tok.Val == "true" {
			return "true", nil
		}
		return "false", nil
	case lexer.TokenNumber:
		r.shift()
		if n, err := strconv.Atoi(tok.Val); err == nil {
			return strconv.FormatFloat(float64(n), 'f', 0, 64), nil
		}
		f, err := strconv.ParseFloat(tok.Val, 64)
		if err != nil {
			return "", errorf(tok.Line, "syntax error: bad number %q", tok.Val)
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	case lexer.TokenString:
		r.shift()
		return tok.Val, nil
	case lexer.TokenData:
		r.shift()
		return r.path("@")
	}
	return r.path("")
}

// path : ID (SEP ID)*, where "..", "." and "this" may only lead, with
// at most maxPathSegments IDs.
func (r *recognizer) path(prefix string) (string, error) {
	tok := r.shift()
	if tok.Kind != lexer.TokenID {
		return "", errorf(tok.Line, "syntax error: expected a name, found %s", describe(tok))
	}
	var original strings.Builder
	original.WriteString(prefix)
	original.WriteString(tok.Val)
	named := !isScopeWord(tok.Val)
	for n := 1; r.is(lexer.TokenSep); n++ {
		if n == maxPathSegments {
			return "", errorf(tok.Line, "a path may have at most %d segments", maxPathSegments)
		}
		original.WriteString(r.shift().Val)
		tok = r.shift()
		if tok.Kind != lexer.TokenID {
			return "", errorf(tok.Line, "syntax error: expected a name, found %s", describe(tok))
		}
		original.WriteString(tok.Val)
		if !isScopeWord(tok.Val) {
			named = true
		} else if named {
			return "", errorf(tok.Line, "syntax error: invalid path %q", original.String())
		}
	}
	s := original.String()
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	return s, nil
}

func isScopeWord(s string) bool { return s == ".." || s == "." || s == "this" }
