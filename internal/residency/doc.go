// Package residency takes the executable's start-up code out of the
// process's resident set once it is idle.
//
// A replica's binary maps about 18 MiB of code and read-only data. At
// start it runs much of it (package initialisation, protobuf descriptor
// registration, log replay, the election, every agent's first report),
// and the kernel maps the neighbours of every page it touches (fault
// around), so right after start almost all of it is resident although an
// idle replica runs about 3 MiB of it. DropExecutablePages tells the
// kernel (madvise MADV_DONTNEED) that the process no longer needs the
// pages of its read-only executable mappings: they leave the resident set
// but stay in the page cache, and a page the process runs again comes
// back with a minor fault, without reading the disk. Nothing is lost and
// nothing is written.
//
// The kernel maps a page that comes back with its neighbours, 64 KiB
// around it (fault-around): scattered over the code and the function
// tables the garbage collector reads for every goroutine's stack, an idle
// replica's few hundred pages become about 11 MiB. Where the kernel
// allows (Linux 6.7, userfaultfd), the drop also turns fault-around off
// for these mappings, so the resident set then shows what the idle
// process really uses: about 4 MiB of code and tables for a replica.
package residency
