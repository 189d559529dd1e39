package netns

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// cmdTimeout bounds every helper command (ip, iptables, ping), so a hung
// tool cannot hang a test or the campaign.
const cmdTimeout = 15 * time.Second

// run executes a command and returns its standard output; a failure names
// the command line and carries its standard error.
func run(name string, args ...string) (string, error) {
	return runInput("", name, args...)
}

// runInput is run with input fed to the command's standard input.
func runInput(input, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if input != "" {
		cmd.Stdin = strings.NewReader(input)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%w: %s %s: %v: %s", ErrCommand, name,
			strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
	}
	return out.String(), nil
}

// requiredTools are the programs Setup and the faults run.
var requiredTools = []string{"ip", "iptables", "iptables-restore", "nsenter", "ping"}

// MissingTools lists the required programs not found in PATH; tests skip
// on a non-empty answer and scripts/chaos-setup.sh installs them.
func MissingTools() []string {
	var missing []string
	for _, t := range requiredTools {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	return missing
}
