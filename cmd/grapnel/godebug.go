// Go 1.25 and later re-read the CPU quota of the cgroup every second and
// adjust GOMAXPROCS to it; a vehicle's quotas are set at boot, and the
// check is a wake-up a second of an otherwise idle process. GOMAXPROCS
// is still taken from the quota at start.

//go:debug updatemaxprocs=0
package main
