// Package workload runs the agent's own workload instances, as the Ankaios
// agent's RuntimeManager and workload control loops do.
//
// A Manager takes the server's ServerHello and UpdateWorkload messages and
// the workload states the server broadcasts. Each own instance gets one
// control loop, a goroutine that owns it from start to removal:
//
//	[found on the host: resume a running instance and go on watching;
//	delete a failed or lost one; keep a succeeded one to start again] →
//	wait for the instance it replaces → wait for add conditions
//	(Pending(WaitingToStart)) → create (Pending(Starting), retried with
//	backoff) → watch the runtime every PollInterval and apply the restart
//	policy → on delete: wait for delete conditions (Stopping(WaitingToStop)),
//	Stopping(RequestedAtRuntime), delete, Removed.
//
// States go out through Config.Report, only when they change, from one
// reporter goroutine so that Report is never called under a lock. The
// dependency view is the server's broadcast merged with the agent's own
// reports, so that a dependency on a workload of the same agent is seen at
// once.
//
// On every ServerHello the Manager asks each runtime what exists on the
// host: an instance it already runs is left alone; one found on the host
// with the same instance name is resumed if it runs (a failover or an
// agent restart must not restart workloads), started again if it
// succeeded and replaced otherwise — after a power cycle every workload
// has ended, and the runtimes never take a process or container from an
// earlier boot for a running one; one of the same workload but another
// instance name is replaced, one the server no longer wants is deleted
// and one missing is created. Started again or replaced, an instance
// waits for its add conditions as a new one does.
//
// Close stops the loops but leaves the workloads running, so that the next
// agent process adopts them.
//
// Goroutines: one reporter per Manager (ends in Close, after a last flush)
// and one per loop (ends when its instance is removed or in Close, which
// waits for it). Timers from the Clock only send on a buffered channel.
package workload
