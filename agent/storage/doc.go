// Package storage watches the storage of the agent's run folder (issue
// 29 point 3; docs/operations.md, "An agent's run folder fails").
//
// The run folder holds what the agent keeps of its workloads: the
// incarnation counter, the process runtime's records and uid table,
// the workloads' files and control interfaces. Flash fails in ways the
// agent cannot fix: it fills up (other functions' logs share it), ext4
// remounts it read-only after an error, a write or an fsync returns EIO.
// None of that stops a running workload: a process workload needs its
// record only when it starts, ends or is deleted. So a Guard turns such
// a failure into a state the agent lives with:
//
//   - Check tells a write's error of the storage (ENOSPC, EROFS, EIO,
//     EDQUOT, EFBIG, of a file in the run folder) from any other. The
//     first marks the run folder failed: the agent logs it once at
//     ERROR, says it in systemd STATUS and to the leader (which opens an
//     AgentStorageFailed problem), and makes no change that needs the
//     run folder until it works again. Running workloads are left alone.
//   - After a failed fsync the kernel may have dropped the pages it could
//     not write, or marked them clean, and report the next fsync as a
//     success, so nothing written since the last good fsync can be
//     trusted (PostgreSQL's fsync lesson). Nothing is therefore written
//     on top of the failed write: the writes that failed are made again
//     whole once the run folder works (Redo, and the workload loops'
//     retries, which write every record anew through internal/durable).
//   - It probes the run folder with backoff (durable.Probe: a file
//     created, written, fsynced and removed, the directory fsynced), and
//     once a probe works it runs the writes to make again, clears the
//     fault and wakes those that wait (Failed's channel), so that the
//     changes that waited are made and the problem closes.
//
// Goroutines: one probe loop while the run folder is failed (ends when a
// probe works, or at Close, which waits for it).
package storage
