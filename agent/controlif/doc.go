// Package controlif is the agent side of the Ankaios control interface:
// the FIFO pair through which a workload talks to the cluster.
//
// For every instance whose workload has at least one allow rule the agent
// keeps <run folder>/<agent>_io/<instance>/control_interface/ with two
// FIFOs: the workload writes length-delimited control_api.ToAnkaios
// messages to `output` and reads control_api.FromAnkaios messages from
// `input`. The first message must be a Hello whose protocol version has the
// agent's major; the agent answers ControlInterfaceAccepted, or
// ConnectionClosed with the reason and then ignores the workload's
// messages until it starts a new connection with another Hello.
//
// Every request is checked against the workload's controlInterfaceAccess
// by package access, which the server uses to check it again. A denied
// request is answered "Access denied" at once; an allowed one gets the
// request id "<workload name>@<id>" and goes to the server through
// Config.Forward. Answers come back through Deliver, which finds the
// workload by that prefix, strips it and writes the answer to `input`.
//
// A session follows the log campaigns its workload opens (logBook): at
// most Config.MaxLogCampaigns at once, a LogsRequest past it answered with
// an error and not forwarded. When the workload's connection ends (a new
// Hello, both FIFOs closed, the instance closed) the agent cancels them at
// the server and keeps their late answers from the workload; when the
// agent's stream ends (ServerGone) the server has ended them itself, and
// the workload is told. A campaign's answers go to the instance that
// opened it.
//
// FIFOs are opened without blocking, so no goroutine waits for a workload
// that never opens its ends: Close and Shutdown always return promptly. A
// write to `input` gives up after 500 ms without progress, or after five
// retries 100 ms apart while nobody has `input` open for reading; a
// workload that stops reading its log entries this way has its log
// campaign cancelled.
package controlif
