package clients

import (
	"errors"
	"fmt"
	"time"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

// ErrBadConfig means the Config cannot run; the error names the field.
var ErrBadConfig = errors.New("bad clients config")

// DefaultTimeout bounds one operation when Config.Timeout is zero.
const DefaultTimeout = 2 * time.Second

// Config says which cluster to load and how.
type Config struct {
	// Addrs are the replicas' gRPC addresses.
	Addrs []string
	// Clients is the number of concurrent clients, each with its own
	// Resolver and stream.
	Clients int
	// Keys are the workload names written, deleted and read; every
	// client uses all of them.
	Keys []string
	// Agent is the agent field of written workloads; "" leaves them
	// unscheduled.
	Agent string
	// ReadShare and DeleteShare are the fractions of reads and deletes;
	// the rest are writes.
	ReadShare, DeleteShare float64
	// Timeout bounds one operation, finding the leader included; past it
	// the outcome is Unknown (Fail if nothing was sent). Zero means
	// DefaultTimeout.
	Timeout time.Duration
	// Seed makes the choice of operations and keys reproducible.
	Seed int64
	// Rate is the most operations per second one client issues; 0 means
	// as fast as they are answered.
	Rate float64
	// TLS holds the PEM files for mutual TLS; nil connects without TLS.
	TLS *rpc.TLSFiles
	// Acks, when set, counts every acknowledged write and delete as it
	// happens, for the timeline.
	Acks *Acks
	// FirstID is the id of the first client (the others follow it); the
	// ids go into the values written, so runs that record into one
	// history give each run its own range and every value stays unique.
	FirstID int
	// Direct makes each client an Ankaios client that is not
	// leader-aware: client i opens its stream at Addrs[i mod len(Addrs)]
	// and stays there, so a follower proxies it to the leader (the path
	// of an unmodified Ankaios CLI or SDK); a broken stream is opened
	// again at the same replica. Otherwise the clients follow the leader.
	Direct bool
}

func (c Config) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return DefaultTimeout
}

// check names the first field that makes the Config unusable.
func (c Config) check() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrBadConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.Addrs) == 0:
		return bad("Addrs", "no replica address given")
	case c.Clients <= 0:
		return bad("Clients", "%d: need at least one client", c.Clients)
	case len(c.Keys) == 0:
		return bad("Keys", "no workload name given")
	case c.ReadShare < 0 || c.ReadShare > 1:
		return bad("ReadShare", "%v: must be within [0, 1]", c.ReadShare)
	case c.DeleteShare < 0 || c.DeleteShare > 1:
		return bad("DeleteShare", "%v: must be within [0, 1]", c.DeleteShare)
	case c.ReadShare+c.DeleteShare > 1:
		return bad("ReadShare+DeleteShare", "%v: must not exceed 1", c.ReadShare+c.DeleteShare)
	case c.Timeout < 0:
		return bad("Timeout", "%v: must not be negative", c.Timeout)
	case c.Rate < 0:
		return bad("Rate", "%v: must not be negative", c.Rate)
	case c.FirstID < 0:
		return bad("FirstID", "%d: must not be negative", c.FirstID)
	}
	seen := map[string]bool{}
	for i, k := range c.Keys {
		if err := state.CheckName("workload", "workload name", k); err != nil {
			return bad(fmt.Sprintf("Keys[%d]", i), "%v", err)
		}
		if seen[k] {
			return bad(fmt.Sprintf("Keys[%d]", i), "%q given twice", k)
		}
		seen[k] = true
	}
	if c.Agent != "" {
		if err := state.CheckName("agent", "agent name", c.Agent); err != nil {
			return bad("Agent", "%v", err)
		}
	}
	return nil
}
