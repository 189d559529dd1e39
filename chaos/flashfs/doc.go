// Package flashfs is a test file system that fails like the flash of a
// vehicle (issue 29): a FUSE passthrough over a backing directory that
// keeps, in a volatile layer, everything not yet made durable, and drops
// it at a power cut — the idea of Jepsen's lazyfs, with the durability
// model of ALICE (OSDI '14). It also fills up, turns read-only, fails
// reads and fsyncs with EIO and decays bits at rest, on command.
//
// The backing directory is the durable state: what survives a power cut.
// A process using the mount sees an ordinary POSIX file system (reads
// see its own writes, mmap works through the kernel's page cache) whose
// durability follows these rules:
//
//   - write(2) and truncate keep the bytes and the new size in memory,
//     per file, at byte granularity. fsync(2) or fdatasync(2) of the file
//     (any descriptor of it; O_SYNC and O_DSYNC writes, which the kernel
//     follows with an fsync) writes them to the backing file: the data
//     is then durable. fdatasync is fsync. close(2) makes nothing durable.
//   - fallocate(2) reserves the blocks in the backing file at once (so
//     a real lack of space shows) and grows the size in memory.
//   - create, mknod, mkdir, symlink, link, unlink, rmdir and rename are
//     applied to the backing directory at once and logged with what
//     undoes them; an unlinked or overwritten entry is set aside in the
//     hidden .flashfs-trash of the backing root, not deleted. Under the
//     PerDirectory model (the default) an operation is durable once every
//     directory whose entries it changed (the parent; both parents of a
//     rename) has been fsynced after it. fsync of a file does not make
//     its name durable. Under the Journal model (ext4's ordered journal)
//     any successful fsync makes every earlier namespace operation durable.
//     When an operation becomes durable, older pending ones on the same
//     name become durable with it (undoing them would move the wrong
//     entry).
//   - chmod, chown and utimes are durable at once.
//
// A power cut (Group.PowerCut) stops every chosen mount at one instant,
// then, for each, writes the torn prefix of the last unsynced write if
// asked, drops every other unsynced byte and size, undoes the pending
// namespace operations newest first (seeing through the durable renames
// that came after them), clears the trash and mounts the backing
// directory again, fresh: the kernel's caches of the old mount go with
// it. Unmount is a clean shutdown: everything becomes durable, as
// umount(8) writes everything back.
//
// Faults, per mount, until healed: full (ENOSPC on writes, fallocate and
// new entries; statfs shows no free block), read-only (EROFS on every
// change, and on an fsync that has something to write), eio (EIO on the
// reads or the fsyncs of the files matching a glob; a failed fsync loses
// the file's unsynced bytes for good, as Linux does: they still read back
// until the power cut but no later fsync writes them) and flip (bits of
// the durable copy of a file flipped at rest). Heal clears the faults.
//
// A group is driven in process (the Group and Mount methods) or through
// the control language (Group.Exec, Group.Serve on a unix socket, and
// the command chaos/cmd/grapnel-flashfs).
//
// The volatile layer is in the test process's memory: if that process
// dies, the mount dies with it and the backing directory keeps every
// namespace operation and none of the unsynced data. xattrs are not
// supported (ENOTSUP); the backing directory must be one file system.
package flashfs
