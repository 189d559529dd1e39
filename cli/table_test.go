package cli

import (
	"strings"
	"testing"
)

func lines(ls ...string) string { return strings.Join(ls, "\n") }

// swdd~cli-table-provides-default-table-output~2
// swdd~cli-table-provides-table-output-with-wrapped-column~1
// swdd~cli-table-provides-table-output-with-truncated-column~1
// swdd~cli-table-wrapped-truncated-column-width-depends-on-terminal-width~1
func TestTableRender(t *testing.T) {
	tbl := Table{
		Headers: []string{"NAME", "AGENT", "INFO"},
		Rows: [][]string{
			{"web", "agent_A", "short"},
			{"database", "agent_B", "a rather long message of 33 chars"},
		},
	}
	tests := []struct {
		name  string
		width int
		fit   Fit
		col   int
		want  string
	}{
		{
			name: "unlimited width pads every column, the last one too",
			want: lines(
				"NAME       AGENT     INFO                             ",
				"web        agent_A   short                            ",
				"database   agent_B   a rather long message of 33 chars",
			),
		},
		{
			name:  "default fit cuts lines at the width",
			width: 30,
			want: lines(
				"NAME       AGENT     INFO     ",
				"web        agent_A   short    ",
				"database   agent_B   a rather ",
			),
		},
		{
			name:  "wrapped column continues on further lines",
			width: 32,
			fit:   FitWrap,
			col:   2,
			want: lines(
				"NAME       AGENT     INFO       ",
				"web        agent_A   short      ",
				"database   agent_B   a rather lo",
				"                     ng message ",
				"                     of 33 chars",
			),
		},
		{
			name:  "truncated column ends with dots",
			width: 32,
			fit:   FitTruncate,
			col:   2,
			want: lines(
				"NAME       AGENT     INFO       ",
				"web        agent_A   short      ",
				"database   agent_B   a rather...",
			),
		},
		{
			name:  "a table that fits is left alone",
			width: 200,
			fit:   FitWrap,
			col:   2,
			want: lines(
				"NAME       AGENT     INFO                             ",
				"web        agent_A   short                            ",
				"database   agent_B   a rather long message of 33 chars",
			),
		},
		{
			name:  "when not even the header fits, lines are cut",
			width: 22,
			fit:   FitWrap,
			col:   2,
			want: lines(
				"NAME       AGENT     I",
				"web        agent_A   s",
				"database   agent_B   a",
			),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tbl.Render(tt.width, tt.fit, tt.col); got != tt.want {
				t.Fatalf("got\n%s\nwant\n%s", strings.ReplaceAll(got, " ", "·"), strings.ReplaceAll(tt.want, " ", "·"))
			}
		})
	}
}

func TestTableHeadersOnly(t *testing.T) {
	got := Table{Headers: []string{"CONFIG"}}.Render(80, FitNone, 0)
	if got != "CONFIG" {
		t.Fatalf("got %q", got)
	}
}

func TestTableCountsCharactersNotBytes(t *testing.T) {
	got := Table{Headers: []string{"A", "B"}, Rows: [][]string{{"ä", "x"}}}.Render(0, FitNone, 0)
	if want := lines("A   B", "ä   x"); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestTruncateAndChunk(t *testing.T) {
	tests := []struct {
		in    string
		n     int
		trunc string
		parts int
	}{
		{"abcdef", 10, "abcdef", 1},
		{"abcdef", 5, "ab...", 2},
		{"abcdef", 3, "...", 2},
		{"abcdef", 2, "..", 3},
		{"abcdef", 0, "", 1},
	}
	for _, tt := range tests {
		if got := truncate(tt.in, tt.n); got != tt.trunc {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.trunc)
		}
		if got := chunk(tt.in, tt.n); len(got) != tt.parts || strings.Join(got, "") != tt.in {
			t.Errorf("chunk(%q, %d) = %q, want %d parts", tt.in, tt.n, got, tt.parts)
		}
	}
}
