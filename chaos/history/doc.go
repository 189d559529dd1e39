// Package history records what the chaos clients did: one Op per request,
// with the time it was issued, the time its answer arrived (or the client
// gave up) and what came back. The checkers in chaos/check read it.
//
// A Recorder is shared by every client goroutine: Begin stamps the call
// time and hands out an id, End stamps the return time and the outcome.
// The outcome keeps what the client can know: OK (acknowledged), Fail
// (the server said no, so the request was definitely not applied) and
// Unknown (a timeout or a lost stream: the request may or may not have
// been applied). Save and Load keep a history as JSON, so that a failing
// run can be checked again or shown in porcupine's visualizer later.
package history
