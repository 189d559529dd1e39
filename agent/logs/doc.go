// Package logs runs the agent's log campaigns: the server's LogsRequest
// asks for the output of some of the agent's instances, and the agent
// streams it back until every source has ended or the campaign is
// cancelled, as the Ankaios agent does.
//
// A campaign opens Runtime.Logs for each requested instance with the
// request's follow, tail, since and until, and reads it line by line.
// Lines of all its sources are sent together in LogEntriesResponse batches:
// a batch goes out a short moment after its first line, or as soon as the
// next line would take it over MaxBatch bytes of protobuf (2 MiB, Ankaios'
// limit). A single line too long for a batch is cut and marked
// " [truncated]", followed by a notice entry; a line over 50 MiB ends its
// source, as in Ankaios. When a source ends the agent sends its
// LogsStopResponse; an instance the agent does not run gets one at once,
// so that a requester never waits for it.
//
// The agent runs at most MaxCampaigns campaigns holding at most
// MaxSources open readers, whoever asked: a request past either cap gets,
// for each instance it cannot serve, one entry saying so and its stop, so
// that the requester does not wait. A source's read buffer grows with its
// traffic, so an idle follow campaign costs a few kB.
//
// Cancel ends one campaign (the requester went away), StopAll every one
// (the server went away). Both close the readers, and once they return
// nothing more is sent for the campaigns they ended.
package logs
