// Package access evaluates a workload's controlInterfaceAccess: which
// requests the workload may send through its control interface. The
// agent checks every request a workload writes into its FIFO, and the
// server checks again every request an agent forwards for a workload, so
// that a compromised agent cannot exceed its workloads' rights. Both use
// this package, so both decide alike.
//
// The semantics are upstream Ankaios's (allow and deny rules, state rules
// with Read, Write or ReadWrite and filter masks, log rules with workload
// name patterns, deny wins, read and write checked separately), made
// sound where upstream is not: a '*' in a request mask stands for every
// name it could expand to, so a deny rule that reaches any of them
// refuses the request; and an allow rule longer than the mask covers it
// only when its extra segments are all '*'. docs/security.md
// ("Control interface") lists the differences.
//
// The package is pure: no time, no I/O, no state of its own.
package access
