package ui

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/grapnel-io/grapnel/state"
)

// LogSource streams the logs of the instances of one workload: it calls
// line for every log line until ctx ends or the workloads' agents stop
// sending, and returns why it stopped.
type LogSource func(ctx context.Context, instances []state.InstanceName, tail int, line func(instance, text string)) error

// serveLogs streams a workload's logs as server-sent events, one per
// line, from a log campaign as `grapnel logs` runs one. The page opens it
// only when asked; it ends with the page or the campaign.
func (h *Handler) serveLogs(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Logs == nil {
		http.Error(w, "logs are not available on this replica", http.StatusNotImplemented)
		return
	}
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	name := r.PathValue("name")
	tail := 100
	if s := r.URL.Query().Get("tail"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > 10000 {
			http.Error(w, fmt.Sprintf("tail %q: a number from 0 to 10000", s), http.StatusBadRequest)
			return
		}
		tail = n
	}
	var insts []state.InstanceName
	h.cfg.FSM.Read(func(st *state.Store, _ uint64) { insts = st.Instances(name) })
	if len(insts) == 0 {
		http.Error(w, fmt.Sprintf("workload %q: no instance to read logs from", name), http.StatusNotFound)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-h.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fl.Flush()
	err := h.cfg.Logs(ctx, insts, tail, func(instance, text string) {
		for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
			fmt.Fprintf(w, "data: %s %s\n\n", instance, l)
		}
		fl.Flush()
	})
	if err != nil && ctx.Err() == nil {
		fmt.Fprintf(w, "event: end\ndata: %s\n\n", strings.ReplaceAll(err.Error(), "\n", " "))
	} else {
		fmt.Fprint(w, "event: end\ndata: logs ended\n\n")
	}
	fl.Flush()
}
