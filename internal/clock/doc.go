// Package clock is the injected time source: a Clock (Now and AfterFunc),
// the real clock, and a Fake that tests advance by hand, so that timers
// such as the agents' reconnect grace, refusal backoff and restart delays
// are tested without sleeping.
//
// It is a leaf package (it imports nothing of ours) because the server,
// the leader-aware client in rpc/client and the agent all take a Clock;
// under server/ it made the agent link a server package.
package clock
