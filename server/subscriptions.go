package server

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/server/events"
)

// Every commit the event subscriptions match costs the leader loop an
// event per subscription, on the loop (notify.go): 131,072 subscriptions
// of the workload states held it 1.4 to 1.9 s per state report (issue
// 27). The subscriptions are therefore capped, per requester (one client
// connection, or one workload through its agent), as log campaigns are,
// and in all: a requester's cap alone would not bound them, since every
// workload of the desired state may subscribe.
const (
	// DefaultMaxEventSubscriptionsPerRequester: a client or a workload
	// needs one or two; as many as log campaigns.
	DefaultMaxEventSubscriptionsPerRequester = 32
	// DefaultMaxEventSubscriptions: a commit they all match holds the
	// loop for about 30 ms (BenchmarkLoopHoldEvents).
	DefaultMaxEventSubscriptions = 4096
)

// admitSubscription checks a new subscription under the prefixed request
// id against the caps and returns the refusal to answer with, "" if it
// may subscribe; a re-subscription under the same id replaces the old
// one and always passes. A refusal is counted and logged (at most once
// per requester per refusalLogWindow) and names the setting.
func (l *leader) admitSubscription(id string) (refusal string) {
	h := l.events
	if h.Has(id) {
		return ""
	}
	perReq, total := l.s.cfg.MaxEventSubscriptionsPerRequester, l.s.cfg.MaxEventSubscriptions
	who, what := "client", "connection"
	if _, rest, _ := rpc.SplitRequestID(id); strings.Contains(rest, "@") {
		who, what = "workload", "workload '"+strings.SplitN(rest, "@", 2)[0]+"'"
	}
	var which string
	switch n := h.Others(id); {
	case n >= perReq:
		which = "per_requester"
		refusal = fmt.Sprintf("Event subscription refused: the %s has %d event subscriptions, as many as the server allows one requester (--max-event-subscriptions-per-requester %d); cancel one first",
			what, n, perReq)
	case h.Len() >= total:
		which = "total"
		refusal = fmt.Sprintf("Event subscription refused: the leader holds %d event subscriptions, as many as it allows (--max-event-subscriptions %d); try again once others have ended",
			h.Len(), total)
	default:
		return ""
	}
	l.s.cfg.Metrics.RefusedEventSubscription(who, which)
	l.s.refusals.Log(l.s.log, slog.LevelWarn, "subscriptions|"+events.Requester(id), "refused an event subscription over a cap",
		"request", id, "cap", which, "refusal", refusal)
	return refusal
}
