package bench

import (
	"os"
	"strings"
)

// LogTail returns the last n lines of a log file, indented, for an error
// message that has to say why a process misbehaved.
func LogTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "    (no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + path + ":\n    " + strings.Join(lines, "\n    ")
}
