// Package logcampaign keeps the leader's bookkeeping of log campaigns: who
// asked for logs (a CLI connection or a workload, the collector) and whose
// logs were asked for (workload instances, the providers).
//
// The server consults the store when a participant disappears. When an agent
// goes away, campaigns collected by its workloads must be cancelled on the
// other agents and collectors elsewhere must be told that the agent's
// workloads stop providing logs. When a CLI disconnects or a collector
// workload is deleted, its campaigns must be cancelled. The store only
// answers which campaigns are affected; the server sends the messages.
//
// A campaign is over, and forgotten, once every instance it asked for has
// stopped (its agent sent the LogsStopResponse, or went away). So the
// store holds live campaigns only, and Live counts those of one collector
// for the server's cap per requester.
//
// Campaigns belong to live streams, so the store lives in the leader's
// memory only and is not replicated. It is not safe for concurrent use; the
// server's request loop owns it.
package logcampaign
