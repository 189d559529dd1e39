package fsm

import "fmt"

// Decode decodes one command (not a batch) exactly as Apply will: its
// type and its body, with the type's entry in the command table
// (commands.go). The leader runs it on every command before proposing it,
// so that an entry that commits always decodes; Apply treats one that
// does not as a version mismatch. A body of an unknown type marked
// IgnoreUnknownTypeFlag decodes to nil; a retired type is refused with
// an error naming it.
func Decode(cmd []byte) (MessageType, Command, error) {
	if len(cmd) == 0 {
		return 0, nil, fmt.Errorf("%w: empty command", ErrUndecodable)
	}
	t := MessageType(cmd[0])
	body, err := decodeBody(t, cmd[1:])
	return t, body, err
}

// CheckType refuses a command whose type, or the type of a command in
// its batch, this version does not know and may not skip, or has
// retired: the refusal of the command table (lookup). A replica runs it
// on every entry the leader sends, before Raft stores it, so that an
// entry no replica of this version could apply is never appended here:
// it costs a look at the type bytes, not a decode.
func CheckType(cmd []byte) error {
	if len(cmd) == 0 {
		return nil
	}
	t := MessageType(cmd[0])
	if t != BatchType {
		_, err := lookup(t)
		return err
	}
	cmds, err := splitBatch(cmd[1:])
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUndecodable, t, err)
	}
	for i, c := range cmds {
		// splitBatch refuses a batch inside a batch.
		if _, err := lookup(MessageType(c[0])); err != nil {
			return fmt.Errorf("command %d of a batch: %w", i, err)
		}
	}
	return nil
}
