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
}

// NewHandler returns a handler without subscribers.
func NewHandler() *Handler {
	return &Handler{subscribers: map[string][]string{}}
}

// Add stores a subscriber with its field masks, replacing an earlier
// subscription under the same request id.
func (h *Handler) Add(requestID string, masks []string) {
	h.subscribers[requestID] = slices.Clone(masks)
}

// Remove drops one subscriber, as on an EventsCancelRequest, and reports
// whether it was subscribed.
func (h *Handler) Remove(requestID string) bool {
	_, ok := h.subscribers[requestID]
	delete(h.subscribers, requestID)
	return ok
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
			delete(h.subscribers, id)
		}
	}
}
