package ui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/grapnel-io/grapnel/cluster"
	"github.com/grapnel-io/grapnel/fsm"
	"github.com/grapnel-io/grapnel/graph"
	"github.com/grapnel-io/grapnel/internal/changefeed"
	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/identity"
	"github.com/grapnel-io/grapnel/rpc/authz"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
	"github.com/grapnel-io/grapnel/state"
)

//go:embed assets
var assets embed.FS

// Config wires a Handler.
type Config struct {
	Node *cluster.Node
	FSM  *fsm.FSM
	// Feed is signalled by the FSM's observer after every applied
	// command (main wires fsm.SetObserver to Feed.Notify).
	Feed *changefeed.Feed
	// Timeline is a workload's merged history (server.WorkloadTimeline).
	Timeline func(*state.History, string) []*grapnelpb.TimelineEvent
	// Logs streams a workload's logs; nil shows none.
	Logs LogSource
	// AgentReleases reads the agents' releases from the leader's memory
	// (server.Server.AgentReleases): nil on a follower; a nil func shows
	// none.
	AgentReleases func() map[string]string
	// AgentLoads answers the agents' load reports, which live in the
	// leader's memory only (GRPCAgentLoads); nil shows none.
	AgentLoads AgentLoadSource
	// Untyped is the role of a client certificate without a grapnel://
	// URI (identity.None refuses it).
	Untyped identity.Role
	Logger  *slog.Logger
	// Clock paces the events streams (MinPushInterval); nil is the
	// system clock.
	Clock clock.Clock
}

// MinPushInterval is the least time between two pushes of one events
// stream: a replica applying entries back to back rebuilds the view for
// an open page at most this often, and a page never waits longer for the
// last change of a burst.
const MinPushInterval = 200 * time.Millisecond

// Handler serves the dashboard. Close ends the open event streams.
type Handler struct {
	cfg  Config
	mux  *http.ServeMux
	stop chan struct{}
	once sync.Once
	// loads is the last answer of cfg.AgentLoads.
	loads loadCache
}

// New returns the dashboard's handler.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Feed == nil {
		cfg.Feed = changefeed.New()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	h := &Handler{cfg: cfg, mux: http.NewServeMux(), stop: make(chan struct{})}
	static, _ := fs.Sub(assets, "assets")
	h.mux.Handle("GET /", http.FileServerFS(static))
	h.mux.HandleFunc("GET /api/overview", h.serveOverview)
	h.mux.HandleFunc("GET /api/workloads/{name}", h.serveDetail)
	h.mux.HandleFunc("GET /api/workloads/{name}/logs", h.serveLogs)
	h.mux.HandleFunc("GET /api/graph", h.serveGraph)
	h.mux.HandleFunc("GET /api/graph.svg", h.serveGraphSVG)
	h.mux.HandleFunc("GET /api/events", h.serveEvents)
	return h
}

// Close ends every open events and logs stream; the HTTP server's own
// Shutdown would wait for them forever.
func (h *Handler) Close() { h.once.Do(func() { close(h.stop) }) }

// viewerKey holds the identity of the browser's certificate in a
// request's context, with the certificates the browser presented: what
// the dashboard asks of the API on the viewer's behalf (logs) acts as the
// viewer, not as the replica, and the replica's guard believes that only
// with the viewer's own certificate (rpc/authz).
type viewerKey struct{}

type viewerInfo struct {
	id    identity.Identity
	certs string // as wire.ForwardedCertKey carries them
}

// viewer returns what ServeHTTP found; false in insecure mode.
func viewer(ctx context.Context) (viewerInfo, bool) {
	v, ok := ctx.Value(viewerKey{}).(viewerInfo)
	return v, ok
}

// ServeHTTP checks the caller's identity, then serves.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.TLS != nil {
		id, err := identity.FromChains(r.TLS.VerifiedChains, h.cfg.Untyped)
		if err != nil {
			http.Error(w, "forbidden: "+err.Error(), http.StatusForbidden)
			return
		}
		if !Allowed(id) {
			http.Error(w, fmt.Sprintf("forbidden: %s may not view the dashboard (%s needs the role %v)", id, authz.ReadState, authz.Holders[authz.ReadState]), http.StatusForbidden)
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), viewerKey{}, viewerInfo{id: id, certs: authz.EncodeCerts(r.TLS.PeerCertificates)}))
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; connect-src 'self' http: https:")
	h.mux.ServeHTTP(w, r)
}

// Allowed reports whether an identity may view the dashboard: whoever
// may read the state (rpc/authz), read-only. Replicas and agents have no
// business there.
func Allowed(id identity.Identity) bool {
	return slices.Contains(authz.Holders[authz.ReadState], id.Role)
}

// current reads the overview under the FSM's read lock, with the agents'
// load as the leader knows it (asked before the lock is taken).
func (h *Handler) current(ctx context.Context) (Overview, error) {
	n := h.cfg.Node
	members, err := n.Members()
	if err != nil {
		return Overview{}, fmt.Errorf("reading the replica set: %w", err)
	}
	leader, _, _ := n.LeaderInfo()
	term := n.Raft().CurrentTerm()
	var releases map[string]string
	if h.cfg.AgentReleases != nil {
		releases = h.cfg.AgentReleases()
	}
	loads := h.agentLoads(ctx)
	var o Overview
	h.cfg.FSM.Read(func(st *state.Store, applied uint64) {
		o = overview(n.ID(), leader, term, applied, members, st, releases, loads)
	})
	return o, nil
}

func (h *Handler) serveOverview(w http.ResponseWriter, r *http.Request) {
	o, err := h.current(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, o)
}

func (h *Handler) serveDetail(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var d Detail
	var ok bool
	h.cfg.FSM.Read(func(st *state.Store, _ uint64) { d, ok = detail(name, st, h.cfg.Timeline) })
	if !ok {
		http.Error(w, fmt.Sprintf("workload %q: not in the desired state", name), http.StatusNotFound)
		return
	}
	writeJSON(w, d)
}

func (h *Handler) graph() *graph.Graph {
	var g *graph.Graph
	h.cfg.FSM.Read(func(st *state.Store, _ uint64) { g = graphOf(st) })
	return g
}

// serveGraph is the graph as `grapnel get graph -o json` prints it.
func (h *Handler) serveGraph(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := graph.WriteJSON(&buf, h.graph()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes())
}

// serveGraphSVG is the same graph drawn by grapnel's own layout, as `get
// graph -o svg` draws it.
func (h *Handler) serveGraphSVG(w http.ResponseWriter, _ *http.Request) {
	var buf bytes.Buffer
	if err := graph.WriteSVG(&buf, h.graph()); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(buf.Bytes())
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}
