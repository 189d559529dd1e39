package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// envComplete is the variable of ank's completion protocol (clap_complete's
// CompleteEnv): `source <(COMPLETE=bash ank)` registers the completion,
// which then calls the program again with COMPLETE set to ask for the
// candidates. Empty or "0" means off, as there.
const envComplete = "COMPLETE"

// completionShells are the values of COMPLETE grapnel answers.
const completionShells = "bash, zsh, fish or powershell"

// completeEnv answers the COMPLETE protocol: with COMPLETE=<shell> and no
// arguments it prints the shell's registration script; with COMPLETE=bash
// and the arguments the bash script passes ("--", the line up to the
// cursor, COMP_WORDBREAKS) it prints the candidates. It reports false
// when COMPLETE is not set, or set with other arguments: the command line
// then runs as usual, so an exported COMPLETE does not break the CLI.
func completeEnv(ctx context.Context, argv0 string, args []string, a *app) (int, bool) {
	shell := a.getenv(envComplete)
	if shell == "" || shell == "0" {
		return 0, false
	}
	if len(args) == 3 && args[0] == "--" && shell == "bash" {
		return a.completeBashRequest(ctx, args[1], args[2]), true
	}
	if len(args) != 0 {
		return 0, false
	}
	root := newRoot(a)
	var err error
	switch shell {
	case "bash":
		err = writeBashRegistration(a.stdout, root.Name(), argv0)
	case "zsh":
		err = root.GenZshCompletion(a.stdout)
	case "fish":
		err = root.GenFishCompletion(a.stdout, true)
	case "powershell":
		err = root.GenPowerShellCompletionWithDesc(a.stdout)
	default:
		err = fmt.Errorf("%s=%q: grapnel completes %s", envComplete, shell, completionShells)
	}
	if err != nil {
		printError(a.stderr, err)
		return exitError, true
	}
	return exitOK, true
}

// bashRegistration is the script `COMPLETE=bash grapnel` prints. It needs
// only bash (no bash-completion package): it hands the program the line up
// to the cursor and bash's word breaks, and the program does the
// splitting, so that "--output=js" or "-s host:25" (where bash replaces
// only the text after '=' or ':') complete as one word. The first line of the answer holds
// options: nospace, files (fall back to file names), dirs.
const bashRegistration = `# grapnel completion for bash: source <(COMPLETE=bash grapnel)
_grapnel_complete() {
    local prog=${COMP_WORDS[0]} opts line
    [[ $prog == "~/"* ]] && prog=$HOME/${prog#"~/"}
    COMPREPLY=()
    {
        IFS= read -r opts || return 0
        while IFS= read -r line; do
            COMPREPLY+=("$line")
        done
    } < <(COMPLETE=bash "$prog" -- "${COMP_LINE:0:COMP_POINT}" "$COMP_WORDBREAKS" 2>/dev/null)
    if [[ " $opts " == *" nospace "* ]]; then
        compopt -o nospace 2>/dev/null
    fi
    if [[ " $opts " == *" files "* ]]; then
        compopt -o default 2>/dev/null
    elif [[ " $opts " == *" dirs "* ]]; then
        compopt -o dirnames 2>/dev/null
    fi
    return 0
}
`

// writeBashRegistration prints the bash script, registered for the name
// and for argv0 as typed when it differs (./grapnel, a full path).
func writeBashRegistration(w io.Writer, name, argv0 string) error {
	names := []string{name}
	if argv0 != "" && argv0 != name {
		names = append(names, argv0)
	}
	var b strings.Builder
	b.WriteString(bashRegistration)
	for _, n := range names {
		fmt.Fprintf(&b, "complete -o nosort -F _grapnel_complete %s 2>/dev/null || complete -F _grapnel_complete %s\n", shellQuote(n), shellQuote(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// defaultWordBreaks is bash's COMP_WORDBREAKS unless changed.
const defaultWordBreaks = " \t\n\"'><=;|&(:"

// completeBashRequest answers one bash completion request: line is the
// command line up to the cursor, breaks bash's COMP_WORDBREAKS (readline
// replaces only the text after the last of them). It asks cobra's completion for
// the candidates (the hidden __complete command, run in this process)
// and prints each as the text that replaces cur. Completion must never
// print into the shell, so a failure prints nothing and exits 1.
func (a *app) completeBashRequest(ctx context.Context, line, breaks string) int {
	if breaks == "" {
		breaks = defaultWordBreaks
	}
	cur := line[strings.LastIndexAny(line, breaks)+1:]
	words, word := splitLine(line)
	if len(words) == 0 {
		return exitError
	}
	args := append([]string{cobra.ShellCompNoDescRequestCmd}, spellOutGlobalS(words[1:])...)
	args = append(args, word)
	var out bytes.Buffer
	root := newRoot(a)
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		return exitError
	}
	cands, directive, ok := parseCobraCompletions(out.String())
	if !ok || directive&cobra.ShellCompDirectiveError != 0 {
		return exitError
	}
	// cobra completes the value of "--flag=value" alone, and readline
	// replaces cur, the part of the word after its last word break: each
	// candidate becomes the whole word, then the part that replaces cur.
	prefix := ""
	if strings.HasPrefix(word, "-") {
		if i := strings.IndexByte(word, '='); i >= 0 {
			prefix = word[:i+1]
		}
	}
	base, rebase := "", strings.HasSuffix(word, cur)
	if rebase {
		base = word[:len(word)-len(cur)]
	}
	var opts []string
	if directive&cobra.ShellCompDirectiveNoSpace != 0 {
		opts = append(opts, "nospace")
	}
	switch {
	case directive&cobra.ShellCompDirectiveFilterDirs != 0:
		opts = append(opts, "dirs")
		cands = nil
	case directive&cobra.ShellCompDirectiveFilterFileExt != 0:
		opts = append(opts, "files")
		cands = nil
	case directive&cobra.ShellCompDirectiveNoFileComp == 0 && len(cands) == 0:
		opts = append(opts, "files")
	}
	var b strings.Builder
	b.WriteString(strings.Join(opts, " ") + "\n")
	for _, c := range cands {
		// cobra leaves some filtering to the shell (fixed flag values).
		full := prefix + c
		if !strings.HasPrefix(full, word) {
			continue
		}
		if rebase {
			if !strings.HasPrefix(full, base) {
				continue
			}
			full = full[len(base):]
		}
		b.WriteString(full + "\n")
	}
	if _, err := io.WriteString(a.stdout, b.String()); err != nil {
		return exitError
	}
	return exitOK
}

// parseCobraCompletions reads the answer of cobra's __completeNoDesc: one
// candidate a line, then ":DIRECTIVE". Active help lines are dropped.
func parseCobraCompletions(out string) (cands []string, directive cobra.ShellCompDirective, ok bool) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, ":") {
		return nil, 0, false
	}
	d, err := strconv.Atoi(last[1:])
	if err != nil {
		return nil, 0, false
	}
	for _, l := range lines[:len(lines)-1] {
		if l == "" || strings.HasPrefix(l, "_activeHelp_") {
			continue
		}
		cands = append(cands, l)
	}
	return cands, cobra.ShellCompDirective(d), true
}

// splitLine splits a command line as the shell does, far enough for
// completion: blanks separate words, quotes and backslashes keep them
// together. word is the unfinished last word ("" after a blank).
func splitLine(line string) (words []string, word string) {
	var cur strings.Builder
	inWord := false
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case quote == '"':
			switch {
			case c == '"':
				quote = 0
			case c == '\\' && i+1 < len(line) && strings.IndexByte("\"\\$`", line[i+1]) >= 0:
				i++
				cur.WriteByte(line[i])
			default:
				cur.WriteByte(c)
			}
		case c == '\\':
			inWord = true
			if i+1 < len(line) {
				i++
				if line[i] != '\n' {
					cur.WriteByte(line[i])
				}
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	return words, cur.String()
}

// The field masks completion offers without asking the server: the parts
// of every complete state, and of its desired state.
var (
	topMasks     = []string{"desiredState", "workloadStates", "agents"}
	desiredMasks = []string{"desiredState.apiVersion", "desiredState.workloads", "desiredState.configs"}
)

// completeMasks offers field masks for `get state` and `get events`: the
// top-level parts and those of desiredState as they are, deeper ones
// (desiredState.workloads.<name>, agents.<name>, ...) from the cluster
// when it answers, nothing deeper when it does not. While the candidates
// are parts that are read further down (desiredState, workloadStates)
// no space follows them, so that a "." goes on.
func (a *app) completeMasks(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
	parent := ""
	if i := strings.LastIndexByte(prefix, '.'); i >= 0 {
		parent = prefix[:i]
	}
	var known []string
	switch parent {
	case "":
		known = topMasks
	case "desiredState":
		known = desiredMasks
	default:
		known = a.liveMasks(cmd, parent)
	}
	var out []string
	for _, m := range known {
		if strings.HasPrefix(m, prefix) {
			out = append(out, m)
		}
	}
	directive := cobra.ShellCompDirectiveNoFileComp
	if len(out) > 0 && (parent == "" || parent == "desiredState" || parent == "workloadStates") {
		directive |= cobra.ShellCompDirectiveNoSpace
	}
	return out, directive
}

// liveMasks asks the cluster for the part at parent and returns the masks
// of its children; nil when the cluster does not answer or parent is no
// map there. Completion never prints an error into the shell.
func (a *app) liveMasks(cmd *cobra.Command, parent string) []string {
	keys, err := a.liveKeys(cmd, parent)
	if err != nil {
		cobra.CompDebugln(fmt.Sprintf("completion: %v", err), true)
		return nil
	}
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, parent+"."+k)
	}
	return out
}
