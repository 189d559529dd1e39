package cli

import (
	"fmt"
	"io"
	"strings"
)

// ANSI sequences used to redraw a live table in place.
const (
	ansiClearLine = "\x1b[K"
	ansiCursorUp  = "\x1b[%dA"
)

// screen shows a block of text that changes over time. On a terminal each
// show overwrites the previous block; elsewhere (a pipe, a log file) each
// block is printed after the last, followed by an empty line, as ank does.
type screen struct {
	w        io.Writer
	terminal bool
	width    int // 0: lines are never wrapped by the terminal
	rows     int // terminal rows the previous block took
}

func (s *screen) show(text string) {
	if !s.terminal {
		fmt.Fprintf(s.w, "%s\n\n", text)
		return
	}
	var b strings.Builder
	b.WriteString("\r")
	if s.rows > 0 {
		fmt.Fprintf(&b, ansiCursorUp, s.rows)
	}
	rows := 0
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(line)
		b.WriteString(ansiClearLine + "\n")
		rows += s.physicalRows(line)
	}
	if extra := s.rows - rows; extra > 0 {
		// Blank what the longer previous block left below, then go back.
		b.WriteString(strings.Repeat(ansiClearLine+"\n", extra))
		fmt.Fprintf(&b, ansiCursorUp, extra)
	}
	s.rows = rows
	io.WriteString(s.w, b.String())
}

// physicalRows is how many terminal rows a line takes once wrapped.
func (s *screen) physicalRows(line string) int {
	n := runeLen(line)
	if s.width <= 0 || n <= s.width {
		return 1
	}
	return (n + s.width - 1) / s.width
}
