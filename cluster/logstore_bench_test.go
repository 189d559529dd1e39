package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// writeBytes is what this process has caused to be written to storage
// (/proc/self/io), or -1 where that is not known.
func writeBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err == nil {
				return n
			}
		}
	}
	return -1
}

// BenchmarkLogAppend stores batches of 1 KiB entries, as a commit of the
// leader or a follower does, in the WAL, in raft.db as --raft-log-store
// bolt opens it ("bolt-store"), and in the bbolt store of earlier releases
// (with the options and the preallocation they used), and reports the
// bytes each append caused to be written to storage: the flash cost of a
// commit on one replica.
func BenchmarkLogAppend(b *testing.B) {
	stores := map[string]func(b *testing.B, dir string) raft.LogStore{
		"wal": func(b *testing.B, dir string) raft.LogStore {
			s, err := openLogStore(dir, DefaultSegmentSize, nil, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		"bolt-store": func(b *testing.B, dir string) raft.LogStore {
			s, err := openStore(dir, LogStoreBolt, DefaultSegmentSize, nil, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		},
		"bolt": func(b *testing.B, dir string) raft.LogStore {
			path := filepath.Join(dir, boltFile)
			s, err := raftboltdb.New(raftboltdb.Options{
				Path:        path,
				BoltOptions: &bbolt.Options{Timeout: 5 * time.Second, NoFreelistSync: true, FreelistType: bbolt.FreelistMapType},
			})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			// Earlier releases filled raft.db with zeros up to 32 MiB past
			// its end, so that commits wrote blocks that existed.
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				b.Fatal(err)
			}
			if _, err := f.WriteAt(make([]byte, 32<<20-fi.Size()), fi.Size()); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			return s
		},
	}
	for _, name := range []string{"bolt", "bolt-store", "wal"} {
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("%s/batch=%d", name, batch), func(b *testing.B) {
				s := stores[name](b, b.TempDir())
				data := make([]byte, 1024)
				logs := make([]*raft.Log, batch)
				idx := uint64(0)
				// Grow the store past its first allocations first.
				for range 200 {
					for j := range logs {
						idx++
						logs[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
					}
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
				before := writeBytes()
				b.ResetTimer()
				for range b.N {
					for j := range logs {
						idx++
						logs[j] = &raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}
					}
					if err := s.StoreLogs(logs); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if after := writeBytes(); before >= 0 && after >= 0 {
					b.ReportMetric(float64(after-before)/float64(b.N), "disk-B/op")
				}
			})
		}
	}
}
