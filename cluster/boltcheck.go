package cluster

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
)

// checkBolt walks the page structure of a bbolt file (raft-wal's
// wal-meta.db) in bounds-checked Go, before bbolt maps it. bbolt reads its
// pages through unsafe pointers and trusts them: a bit flipped in a page
// id, an element offset or a count makes it fault on its memory map, loop
// on a cycle until memory runs out, or allocate gigabytes, none of which a
// recover catches. So every page the file's newest valid meta reaches
// (the bucket tree, inline buckets, the freelist) is checked to lie in the
// file and under the high-water mark, to carry its own id and a known type,
// to be reached once, and to keep its elements inside itself. A file that
// passes can be read by bbolt without those failures (its keys and values
// may still be wrong; the caller checks what it reads).
//
// The format is bbolt v1.3's (go.etcd.io/bbolt page.go, db.go, bucket.go).
func checkBolt(b []byte) error {
	const (
		pageHeader  = 16
		elemSize    = 16 // branch and leaf elements alike
		bucketHead  = 16 // root pgid, sequence
		metaMagic   = 0xED0CDAED
		metaVersion = 2
		branchPage  = 0x01
		leafPage    = 0x02
		metaPage    = 0x04
		freePage    = 0x10
		bucketLeaf  = 0x01
		maxDepth    = 64
		noFreelist  = ^uint64(0)
	)
	le := binary.LittleEndian
	bad := func(format string, a ...any) error {
		return &CorruptError{What: "raft log metadata", Reason: fmt.Sprintf(format, a...)}
	}

	// The meta pages: bbolt takes the one with the higher txid that
	// validates. Page 0's page size places page 1.
	type meta struct {
		pageSize            uint64
		root, freelist, hwm uint64
		txid                uint64
		ok                  bool
	}
	readMeta := func(off int) meta {
		if off+pageHeader+64 > len(b) {
			return meta{}
		}
		m := b[off+pageHeader : off+pageHeader+64]
		if le.Uint16(b[off+8:]) != metaPage || le.Uint32(m[0:]) != metaMagic || le.Uint32(m[4:]) != metaVersion {
			return meta{}
		}
		if sum := le.Uint64(m[56:]); sum != 0 {
			h := fnv.New64a()
			h.Write(m[:56])
			if h.Sum64() != sum {
				return meta{}
			}
		}
		return meta{pageSize: uint64(le.Uint32(m[8:])), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
			hwm: le.Uint64(m[40:]), txid: le.Uint64(m[48:]), ok: true}
	}
	m0 := readMeta(0)
	ps := m0.pageSize
	if !m0.ok {
		ps = 4096 // bbolt's guess when page 0 is unreadable
	}
	if ps < 512 || ps > 1<<20 || ps&(ps-1) != 0 {
		return bad("page size %d", ps)
	}
	m1 := readMeta(int(ps))
	m := m0
	if !m0.ok || (m1.ok && m1.txid > m0.txid) {
		m = m1
	}
	if !m.ok {
		return bad("no valid meta page")
	}
	if m.pageSize != ps {
		return bad("meta page sizes differ: %d and %d", ps, m.pageSize)
	}
	size := uint64(len(b))
	if m.hwm < 2 || m.hwm > size/ps {
		return bad("high-water page %d in a file of %d pages", m.hwm, size/ps)
	}

	seen := make(map[uint64]bool)
	// page returns page id's bytes, overflow pages included.
	page := func(id uint64, want uint16) ([]byte, error) {
		if id < 2 || id >= m.hwm {
			return nil, bad("page %d outside 2..%d", id, m.hwm-1)
		}
		if seen[id] {
			return nil, bad("page %d reached twice", id)
		}
		seen[id] = true
		h := b[id*ps : id*ps+pageHeader]
		if got := le.Uint64(h[0:]); got != id {
			return nil, bad("page %d says it is page %d", id, got)
		}
		flags := le.Uint16(h[8:])
		if flags&want == 0 {
			return nil, bad("page %d has type %#x, want %#x", id, flags, want)
		}
		n := uint64(le.Uint32(h[12:])) + 1
		if id+n > m.hwm {
			return nil, bad("page %d overflows past the high-water page", id)
		}
		for o := id + 1; o < id+n; o++ {
			seen[o] = true
		}
		return b[id*ps : (id+n)*ps], nil
	}

	var walk func(p []byte, depth int) error
	// elems checks that count elements and what they point at lie in p.
	elems := func(p []byte) (int, error) {
		count := int(le.Uint16(p[10:]))
		if pageHeader+count*elemSize > len(p) {
			return 0, bad("%d elements overflow a page of %d bytes", count, len(p))
		}
		return count, nil
	}
	bucket := func(v []byte, depth int) error {
		if len(v) < bucketHead {
			return bad("bucket value of %d bytes", len(v))
		}
		root := le.Uint64(v[0:])
		if root != 0 {
			p, err := page(root, branchPage|leafPage)
			if err != nil {
				return err
			}
			return walk(p, depth+1)
		}
		inline := v[bucketHead:]
		if len(inline) < pageHeader || le.Uint16(inline[8:])&leafPage == 0 {
			return bad("inline bucket without a leaf page")
		}
		return walk(inline, depth+1)
	}
	walk = func(p []byte, depth int) error {
		if depth > maxDepth {
			return bad("tree deeper than %d", maxDepth)
		}
		count, err := elems(p)
		if err != nil {
			return err
		}
		flags := le.Uint16(p[8:])
		for i := 0; i < count; i++ {
			e := pageHeader + i*elemSize
			el := p[e : e+elemSize]
			if flags&branchPage != 0 {
				pos, ksize := uint64(le.Uint32(el[0:])), uint64(le.Uint32(el[4:]))
				if uint64(e)+pos+ksize > uint64(len(p)) {
					return bad("branch key outside its page")
				}
				child, err := page(le.Uint64(el[8:]), branchPage|leafPage)
				if err != nil {
					return err
				}
				if err := walk(child, depth+1); err != nil {
					return err
				}
				continue
			}
			eflags := le.Uint32(el[0:])
			pos, ksize, vsize := uint64(le.Uint32(el[4:])), uint64(le.Uint32(el[8:])), uint64(le.Uint32(el[12:]))
			end := uint64(e) + pos + ksize + vsize
			if end > uint64(len(p)) {
				return bad("leaf value outside its page")
			}
			if eflags&bucketLeaf != 0 {
				if err := bucket(p[uint64(e)+pos+ksize:end], depth); err != nil {
					return err
				}
			}
		}
		return nil
	}

	root, err := page(m.root, branchPage|leafPage)
	if err != nil {
		return fmt.Errorf("root bucket: %w", err)
	}
	if err := walk(root, 0); err != nil {
		return err
	}
	if m.freelist != noFreelist {
		fl, err := page(m.freelist, freePage)
		if err != nil {
			return fmt.Errorf("freelist: %w", err)
		}
		count, idx := uint64(le.Uint16(fl[10:])), uint64(0)
		if count == 0xFFFF {
			count, idx = le.Uint64(fl[pageHeader:]), 1
		}
		if pageHeader+(idx+count)*8 > uint64(len(fl)) || count > m.hwm {
			return bad("freelist of %d pages overflows its page", count)
		}
		for i := idx; i < idx+count; i++ {
			if id := le.Uint64(fl[pageHeader+i*8:]); id < 2 || id >= m.hwm {
				return bad("freelist names page %d outside 2..%d", id, m.hwm-1)
			}
		}
	}
	return nil
}
