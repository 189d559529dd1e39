// Package clock is the time source of the leader-only server logic. The
// server takes a Clock instead of calling time directly, so that tests can
// drive timers such as the agents' reconnect grace with a Fake.
package clock
