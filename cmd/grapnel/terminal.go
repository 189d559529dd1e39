package main

import (
	"io"
	"os"
	"strconv"
)

// defaultWidth is assumed when a terminal does not tell its width.
const defaultWidth = 80

// isTerminal reports whether w is a character device, i.e. a terminal
// rather than a pipe or file.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

func widthFromEnv() int {
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 {
		return n
	}
	return defaultWidth
}
