package syncbuf

import (
	"strings"
	"sync"
	"testing"
)

// Writers and a reader at once: every write is kept whole (run with
// -race).
func TestConcurrentWritesAndReads(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if _, err := b.Write([]byte("ab\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := b.String(); strings.Count(got, "ab\n") != 400 || len(got) != 1200 {
		t.Fatalf("%d bytes, %d lines", len(got), strings.Count(got, "\n"))
	}
}
