package flashfs

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// The overlay reads back exactly what a plain byte slice would hold,
// through random overlapping writes, appends and truncates.
func TestOverlayMatchesModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		var o overlay
		model := []byte{}
		written := []bool{}
		for step := 0; step < 40; step++ {
			if r.IntN(6) == 0 {
				n := r.IntN(len(model) + 1)
				o.truncate(int64(n))
				model, written = model[:n], written[:n]
				continue
			}
			off := r.IntN(len(model) + 8)
			if r.IntN(3) == 0 {
				off = len(model) // an append
			}
			data := make([]byte, 1+r.IntN(12))
			for i := range data {
				data[i] = byte('a' + r.IntN(26))
			}
			o.write(int64(off), data)
			for len(model) < off+len(data) {
				model, written = append(model, 0), append(written, false)
			}
			copy(model[off:], data)
			for i := range data {
				written[off+i] = true
			}
		}
		got := make([]byte, len(model))
		o.read(0, got)
		if !bytes.Equal(got, model) {
			t.Fatalf("round %d: overlay reads %q, want %q", round, got, model)
		}
		var n int64
		for _, w := range written {
			if w {
				n++
			}
		}
		if o.bytes() != n {
			t.Fatalf("round %d: overlay holds %d bytes, %d were written", round, o.bytes(), n)
		}
		for i := 1; i < len(o.ext); i++ {
			if o.ext[i-1].end() > o.ext[i].off {
				t.Fatalf("round %d: extents overlap: %d..%d and %d", round, o.ext[i-1].off, o.ext[i-1].end(), o.ext[i].off)
			}
		}
	}
}

// A file's volatile layer over a real backing file: reads see every
// write and truncate, flush makes the backing file equal to what was
// read, and dropping the layer (a power cut) leaves the backing file as
// of the last flush.
func TestFileStateFlushAndDrop(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := 0; round < 50; round++ {
		p := filepath.Join(t.TempDir(), "f")
		durable := bytes.Repeat([]byte{'D'}, r.IntN(64))
		if err := os.WriteFile(p, durable, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		s, err := newFileState(int(f.Fd()), "f")
		if err != nil {
			t.Fatal(err)
		}
		visible := append([]byte(nil), durable...)
		for step := 0; step < 30; step++ {
			switch r.IntN(5) {
			case 0:
				n := r.IntN(len(visible) + 20)
				s.setSize(int64(n))
				for len(visible) < n {
					visible = append(visible, 0)
				}
				visible = visible[:n]
			case 1:
				if err := s.flush(); err != nil {
					t.Fatal(err)
				}
				durable = append([]byte(nil), visible...)
			default:
				off := r.IntN(len(visible) + 10)
				data := bytes.Repeat([]byte{byte('a' + step)}, 1+r.IntN(16))
				s.write(uint64(step), int64(off), data)
				for len(visible) < off+len(data) {
					visible = append(visible, 0)
				}
				copy(visible[off:], data)
			}
			got := make([]byte, len(visible)+5)
			n, err := s.readAt(got, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got[:n], visible) {
				t.Fatalf("round %d step %d: reads %q, want %q", round, step, got[:n], visible)
			}
		}
		f.Close() // the power cut: the state is dropped unflushed
		onDisk, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(onDisk, durable) {
			t.Fatalf("round %d: backing file holds %q, want the last flushed %q", round, onDisk, durable)
		}
	}
}

// A failed fsync loses the bytes it held: they still read back, no later
// flush writes them, and writes over them are kept.
func TestFileStateLostBytes(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := newFileState(int(f.Fd()), "f")
	if err != nil {
		t.Fatal(err)
	}
	s.write(1, 0, []byte("abcd"))
	s.markLost()
	s.write(2, 2, []byte("XY")) // over part of the lost bytes
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 10)
	if _, err := s.readAt(got, 0); err != nil {
		t.Fatal(err)
	}
	if string(got) != "abXY456789" {
		t.Fatalf("reads %q, want abXY456789", got)
	}
	onDisk, _ := os.ReadFile(p)
	if string(onDisk) != "01XY456789" {
		t.Fatalf("backing file %q, want 01XY456789 (the lost ab never written)", onDisk)
	}
}
