// Package events is the leader's EventHandler: it stores the event
// subscriptions made with CompleteStateRequest{subscribeForEvents} and turns
// a change of the CompleteState into one CompleteStateResponse per
// subscriber whose field masks the change touches.
//
// A subscription is keyed by its request id as prefixed by the gRPC layer:
// "<conn>@<id>" for a client connection and "<agent>@<workload>@<id>" for a
// workload using the control interface. The prefixes let the server drop all
// subscriptions of a connection, an agent or a workload when it goes away.
//
// Subscriptions belong to live streams, so the handler lives in the leader's
// memory only. It is pure: it computes events and the server sends them. It
// is not safe for concurrent use; the server's request loop owns it.
package events
