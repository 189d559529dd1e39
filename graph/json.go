package graph

import (
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON writes g as indented JSON, the form documented in
// docs/operations.md, followed by a newline.
func WriteJSON(w io.Writer, g *Graph) error {
	b, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return fmt.Errorf("cannot write the graph as JSON: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}
