package ui

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// serveEvents is the live stream of one open page: the overview at once,
// then again whenever the cluster (leader, term, membership: Node.Changes)
// or the store (an applied command: Feed) changed, coalesced, at most
// once per MinPushInterval. It runs on the HTTP server's goroutine for the
// request; its only timer is that interval after a push; it ends when the
// browser goes away or the dashboard closes.
func (h *Handler) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	clusterChanges, stopCluster := h.cfg.Node.Changes()
	defer stopCluster()
	storeChanges, stopStore := h.cfg.Feed.Subscribe()
	defer stopStore()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	var last []byte
	for {
		o, err := h.current()
		if err == nil {
			b, _ := json.Marshal(o)
			// A store change that altered nothing shown (a history
			// record, a lock) sends nothing.
			if string(b) != string(last) {
				if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
					return
				}
				fl.Flush()
				last = b
				// Changes meanwhile wait in the feeds' one-slot
				// channels and make one push after the interval.
				select {
				case <-clock.After(h.cfg.Clock, MinPushInterval):
				case <-r.Context().Done():
					return
				case <-h.stop:
					return
				}
			}
		}
		select {
		case <-clusterChanges:
		case <-storeChanges:
		case <-r.Context().Done():
			return
		case <-h.stop:
			return
		}
	}
}
