package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// serveEvents is the live stream of one open page: the overview at once,
// then again whenever the cluster (leader, term, membership: Node.Changes)
// or the store (an applied command: Feed) changed, coalesced, at most
// once per MinPushInterval. It runs on the HTTP server's goroutine for the
// request; its timers are that interval after a push and, with a load
// source, the LoadRefreshInterval that asks the leader for the agents'
// load again; it ends when the browser goes away or the dashboard closes.
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
		o, err := h.current(r.Context())
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
		// The agents' load changes with no change of the store (it is
		// the leader's memory): with a load source, the page is rebuilt
		// every LoadRefreshInterval too, and pushed if it differs.
		var (
			reload <-chan time.Time
			timer  *clock.ChanTimer
		)
		if h.cfg.AgentLoads != nil {
			timer = clock.NewTimer(h.cfg.Clock, LoadRefreshInterval)
			reload = timer.C
		}
		done := false
		select {
		case <-clusterChanges:
		case <-storeChanges:
		case <-reload:
		case <-r.Context().Done():
			done = true
		case <-h.stop:
			done = true
		}
		if timer != nil {
			timer.Stop()
		}
		if done {
			return
		}
	}
}
