package cli

import (
	"strings"
	"unicode/utf8"
)

// columnGap separates columns, as in ank's blank-style tables.
const columnGap = "   "

// truncSuffix marks a cell cut to fit the terminal.
const truncSuffix = "..."

// Table is a borderless table with left-aligned columns. Every cell,
// including the last column, is padded to its column's width, which keeps
// the output byte-compatible with ank's tables.
type Table struct {
	Headers []string
	Rows    [][]string
}

// Fit says how one column gives way when a table is wider than the
// terminal. With FitNone every line is cut at the terminal width.
type Fit int

const (
	FitNone Fit = iota
	// FitWrap wraps the column's cells onto further lines.
	FitWrap
	// FitTruncate cuts the column's cells and ends them with "...".
	FitTruncate
)

// Render lays the table out for a terminal of the given width; width <= 0
// means unlimited. fit and col choose the column that gives way; when even
// its header does not fit, every line is cut instead.
func (t Table) Render(width int, fit Fit, col int) string {
	widths := t.widths()
	if width > 0 && fit != FitNone && col >= 0 && col < len(widths) {
		others := t.totalWidth(widths) - widths[col]
		if others+runeLen(t.Headers[col]) <= width {
			avail := width - others
			if widths[col] > avail {
				return t.fitColumn(col, avail, fit)
			}
			return t.lines(widths, nil)
		}
	}
	return t.lines(widths, func(line string) string {
		if width > 0 {
			return cutRunes(line, width)
		}
		return line
	})
}

// fitColumn renders with column col limited to avail characters.
func (t Table) fitColumn(col, avail int, fit Fit) string {
	rows := make([][]string, 0, len(t.Rows))
	for _, r := range t.Rows {
		cell := cellAt(r, col)
		if runeLen(cell) <= avail {
			rows = append(rows, r)
			continue
		}
		if fit == FitTruncate {
			nr := append([]string(nil), r...)
			nr[col] = truncate(cell, avail)
			rows = append(rows, nr)
			continue
		}
		for i, part := range chunk(cell, avail) {
			nr := make([]string, len(t.Headers))
			if i == 0 {
				copy(nr, r)
			}
			nr[col] = part
			rows = append(rows, nr)
		}
	}
	fitted := Table{Headers: t.Headers, Rows: rows}
	return fitted.lines(fitted.widths(), nil)
}

func (t Table) widths() []int {
	w := make([]int, len(t.Headers))
	for i, h := range t.Headers {
		w[i] = runeLen(h)
	}
	for _, r := range t.Rows {
		for i := range w {
			if n := runeLen(cellAt(r, i)); n > w[i] {
				w[i] = n
			}
		}
	}
	return w
}

func (t Table) totalWidth(widths []int) int {
	n := 0
	for _, w := range widths {
		n += w
	}
	return n + len(columnGap)*(len(widths)-1)
}

func (t Table) lines(widths []int, edit func(string) string) string {
	out := make([]string, 0, len(t.Rows)+1)
	out = append(out, t.line(t.Headers, widths))
	for _, r := range t.Rows {
		out = append(out, t.line(r, widths))
	}
	if edit != nil {
		for i, l := range out {
			out[i] = edit(l)
		}
	}
	return strings.Join(out, "\n")
}

func (t Table) line(cells []string, widths []int) string {
	var b strings.Builder
	for i, w := range widths {
		if i > 0 {
			b.WriteString(columnGap)
		}
		c := cellAt(cells, i)
		b.WriteString(c)
		b.WriteString(strings.Repeat(" ", w-runeLen(c)))
	}
	return b.String()
}

func cellAt(r []string, i int) string {
	if i < len(r) {
		return r[i]
	}
	return ""
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// cutRunes keeps the first n characters of s.
func cutRunes(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// truncate cuts s to n characters including the "..." suffix.
func truncate(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	if n <= len(truncSuffix) {
		return cutRunes(truncSuffix, n)
	}
	return cutRunes(s, n-len(truncSuffix)) + truncSuffix
}

// chunk splits s into pieces of at most n characters.
func chunk(s string, n int) []string {
	r := []rune(s)
	if n <= 0 {
		return []string{s}
	}
	var out []string
	for len(r) > n {
		out = append(out, string(r[:n]))
		r = r[n:]
	}
	return append(out, string(r))
}
