// Package durable writes the files Grapnel keeps on disk so that a crash
// at any point leaves a reader the old content or the new one, never an
// empty, torn or missing file, and so that once a call returns a power
// cut keeps what it wrote.
//
// It follows the rules a POSIX file system keeps across a crash, those
// of ALICE (OSDI '14) and of Jepsen's lazyfs: a file's data is durable
// once the file is fsynced; a name created, linked, renamed or removed
// in a directory is durable once that directory is fsynced; what is not
// durable may or may not be there after the crash. So:
//
//   - WriteFile and Replace write a temporary file in the target's
//     directory, fsync and close it, rename it over the target and fsync
//     the directory;
//   - Create does the same but links the file to its name, which fails
//     when the name exists: a key is never replaced, and never seen half
//     written;
//   - Rename and Remove fsync the directories they change;
//   - MkdirAll fsyncs the parent of every directory it makes, so that
//     the files synced in it are reachable after a crash.
//
// A failed fsync is not retried: the kernel may have dropped the pages
// it could not write and report success the next time (the PostgreSQL
// fsync lesson), so the step fails, the temporary file is removed and
// the caller gets an *Error naming the file and the step.
//
// The few system calls go through FS, so that a test can run an update
// sequence on a crash model (package crashfs) and cut it after every
// call. scripts/check-durable.sh keeps product code from writing files
// another way, save the exceptions it lists with their reasons.
package durable
