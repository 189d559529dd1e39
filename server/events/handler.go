package events

import (
	"slices"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// Handler is the event subscription store: request id -> field masks. One
// subscriber may subscribe to several masks; no masks means the whole
// CompleteState.
type Handler struct {
	subscribers map[string][]string
	// perRequester counts the subscriptions of each requester
	// (Requester), for the server's caps.
	perRequester map[string]int
}

// NewHandler returns a handler without subscribers.
func NewHandler() *Handler {
	return &Handler{subscribers: map[string][]string{}, perRequester: map[string]int{}}
}

// Add stores a subscriber with its field masks, replacing an earlier
// subscription under the same request id.
func (h *Handler) Add(requestID string, masks []string) {
	if _, ok := h.subscribers[requestID]; !ok {
		h.perRequester[Requester(requestID)]++
	}
	h.subscribers[requestID] = slices.Clone(masks)
}

// Remove drops one subscriber, as on an EventsCancelRequest, and reports
// whether it was subscribed.
func (h *Handler) Remove(requestID string) bool {
	_, ok := h.subscribers[requestID]
	if ok {
		h.forget(requestID)
	}
	return ok
}

// forget drops a subscription that exists.
func (h *Handler) forget(requestID string) {
	delete(h.subscribers, requestID)
	r := Requester(requestID)
	if h.perRequester[r]--; h.perRequester[r] <= 0 {
		delete(h.perRequester, r)
	}
}

// Has reports whether requestID is subscribed.
func (h *Handler) Has(requestID string) bool {
	_, ok := h.subscribers[requestID]
	return ok
}

// Len counts the subscriptions.
func (h *Handler) Len() int { return len(h.subscribers) }

// Others counts the subscriptions of requestID's requester other than
// requestID itself, which a new subscription under that id would
// replace.
func (h *Handler) Others(requestID string) int {
	n := h.perRequester[Requester(requestID)]
	if _, ok := h.subscribers[requestID]; ok {
		n--
	}
	return n
}

// Requester names who made a subscription, from its request id: the
// workload ("<agent>@<workload>") for an id of a workload's, the
// connection for a client's, and the id itself for one without a prefix.
func Requester(requestID string) string {
	parts := strings.SplitN(requestID, "@", 3)
	switch len(parts) {
	case 3:
		return parts[0] + "@" + parts[1]
	case 2:
		return parts[0]
	default:
		return requestID
	}
}

// HasSubscribers lets the server skip computing state differences when
// nobody listens.
func (h *Handler) HasSubscribers() bool {
	return len(h.subscribers) > 0
}

// RemoveAgent drops the subscriptions of all workloads on a lost agent.
func (h *Handler) RemoveAgent(agent string) {
	h.removePrefix(agent + "@")
}

// RemoveConnection drops the subscriptions of a client connection that said
// Goodbye.
func (h *Handler) RemoveConnection(conn string) {
	h.removePrefix(conn + "@")
}

// RemoveWorkload drops the subscriptions of a deleted workload.
func (h *Handler) RemoveWorkload(agent, workload string) {
	h.removePrefix(agent + "@" + workload + "@")
}

// Subscribers lists the subscribed request ids in order.
func (h *Handler) Subscribers() []string {
	return state.SortedKeys(h.subscribers)
}

func (h *Handler) removePrefix(prefix string) {
	for id := range h.subscribers {
		if strings.HasPrefix(id, prefix) {
			h.forget(id)
		}
	}
}
