// Package client is the commander side of the Ankaios CLI stream: one
// CliConnection.ConnectCli stream to a Grapnel (or Ankaios) server, over
// which requests are matched to their responses by request id, long-lived
// requests (event subscriptions, log campaigns) deliver every response with
// their id, and the server's unsolicited workload-state broadcasts are
// handed to whoever waits for workloads to settle.
//
// The stream is owned by one receive goroutine; callers never read it.
// Nothing here retries: a broken stream fails every pending request with
// an error that says why, and the CLI reports it.
package client
