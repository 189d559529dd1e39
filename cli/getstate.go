package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

// FormatState renders a complete-state tree as `get state` prints it,
// without the fields Ankaios leaves out when they are empty (see
// printedState).
// swdd~cli-shall-support-desired-state-yaml~1
// swdd~cli-shall-support-desired-state-json~1
func FormatState(cs state.Tree, f Format) (string, error) {
	cs = printedState(cs)
	if f == FormatJSON {
		out, err := EncodeJSON(cs, completeStateOrder, true)
		return out + "\n", err
	}
	return EncodeYAML(cs, completeStateOrder)
}

// GetState prints the complete state, or the parts the masks select.
// swdd~cli-provides-get-desired-state~1
// swdd~cli-provides-object-field-mask-arg-to-get-partial-desired-state~1
//
// From a Grapnel server it also tells the desired state's revision, for
// --expect-revision (docs/locks.md): in YAML as a comment on the first
// line, "# revision: N", which YAML readers (set state among them)
// ignore; in JSON, whose readers take the output whole, on stderr. With
// -q (Quiet) it is left out: only the state is printed. It is
// read before the state, so it is never newer than what is printed: an
// update at it is at worst refused for a change the reader saw.
func (s *Session) GetState(ctx context.Context, masks []string, f Format) error {
	rev, hasRev := s.revision(ctx)
	cs, err := s.CompleteState(ctx, masks)
	if err != nil {
		return err
	}
	out, err := FormatState(cs, f)
	if err != nil {
		return err
	}
	if hasRev && !s.Quiet {
		if f == FormatJSON {
			if s.Err != nil {
				fmt.Fprintf(s.Err, "revision: %d\n", rev)
			}
		} else {
			out = fmt.Sprintf("# revision: %d\n", rev) + out
		}
	}
	_, err = io.WriteString(s.Out, out)
	return err
}

// revision asks the Plan service for the desired state's revision; false
// without the service (an Ankaios server) or when it does not answer.
func (s *Session) revision(ctx context.Context) (uint64, bool) {
	if s.Plan == nil {
		return 0, false
	}
	resp, err := s.Plan.Revision(ctx, &grapnelpb.RevisionRequest{})
	if err != nil {
		s.debugf("no revision: %v", err)
		return 0, false
	}
	return resp.GetRevision(), true
}

// SetState sends the CompleteState-shaped YAML in file ("-" for stdin)
// with the given update masks, then waits for the workloads it changed.
// swdd~cli-provides-set-desired-state~1
// swdd~cli-supports-yaml-to-set-desired-state~1
func (s *Session) SetState(ctx context.Context, masks []string, file string) error {
	name, data, err := readInput(file, s.In)
	if err != nil {
		return err
	}
	t, err := state.ParseTree(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	cs, err := rpc.CompleteStateFromTree(t)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	args := make([]string, 0, len(masks)+1)
	for _, m := range append(masks, file) {
		args = append(args, shellQuote(m))
	}
	s.planHint = planRevisionHint("set state", args...)
	return s.updateAndWait(ctx, cs, masks)
}

// readInput reads a file, or stdin for "-"; the name is for messages.
func readInput(file string, stdin io.Reader) (string, []byte, error) {
	if file == "-" {
		if stdin == nil {
			stdin = os.Stdin
		}
		data, err := io.ReadAll(stdin)
		if err != nil {
			return "stdin", nil, fmt.Errorf("cannot read stdin: %w", err)
		}
		return "stdin", data, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		if os.IsNotExist(err) {
			return file, nil, fmt.Errorf("file '%s' not found", file)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return file, nil, fmt.Errorf("cannot read '%s': %w", file, err)
	}
	return file, data, nil
}
