package connlimit

import (
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/grapnel-io/grapnel/internal/clock"
)

// Limits are the caps of one listener; a cap of 0 is none.
type Limits struct {
	// PerSource caps the connections open at once from one IP address.
	PerSource int
	// Total caps the connections open at once.
	Total int
}

// Reason is why a connection was refused.
type Reason string

// The reasons, as metric labels.
const (
	OverSource Reason = "per_source"
	OverTotal  Reason = "total"
)

// LogWindow is the shortest time between two log lines of refusals; the
// next line carries the count of those left out.
const LogWindow = 10 * time.Second

// Logger is what a listener logs refusals to: a *slog.Logger, or an
// hclog.Logger (the cluster's).
type Logger interface {
	Warn(msg string, args ...any)
}

var _ Logger = (*slog.Logger)(nil)

// Config says how to wrap a listener.
type Config struct {
	// Name says which listener it is in the log and the metrics
	// (grpc, raft, metrics, dashboard).
	Name   string
	Limits Limits
	// Logger gets the refusals, rate-limited; nil logs nothing.
	Logger Logger
	// Clock times the log's rate limit; nil is the system clock.
	Clock clock.Clock
}

// Listener is a net.Listener whose Accept hands out only connections
// within the caps. Its zero value is not usable; use Wrap.
type Listener struct {
	net.Listener
	cfg Config

	mu       sync.Mutex // guards open, bySource, lastLog, quiet
	open     int
	bySource map[string]int
	lastLog  time.Time
	quiet    int // refusals not logged since lastLog

	refused [2]atomic.Uint64 // by reason: OverSource, OverTotal
}

// Wrap bounds ln's connections by cfg.Limits.
func Wrap(ln net.Listener, cfg Config) *Listener {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	return &Listener{Listener: ln, cfg: cfg, bySource: map[string]int{}}
}

// Accept returns the next connection within the caps, closing those over
// them as they come.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := Source(c.RemoteAddr())
		why, ok := l.take(src)
		if ok {
			return &Conn{Conn: c, l: l, src: src}, nil
		}
		// Counted, and the log line decided, before the close, so that
		// whoever sees the close sees both; written after it.
		l.refused[reasonIndex(why)].Add(1)
		line := l.logRefusal(why, src)
		c.Close()
		line()
	}
}

func reasonIndex(why Reason) int {
	if why == OverSource {
		return 0
	}
	return 1
}

// take counts a new connection from src, or says which cap refuses it.
func (l *Listener) take(src string) (Reason, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.cfg.Limits
	switch {
	case lim.PerSource > 0 && l.bySource[src] >= lim.PerSource:
		return OverSource, false
	case lim.Total > 0 && l.open >= lim.Total:
		return OverTotal, false
	}
	l.open++
	l.bySource[src]++
	return "", true
}

// release uncounts a connection from src.
func (l *Listener) release(src string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.bySource[src] - 1; n > 0 {
		l.bySource[src] = n
	} else {
		delete(l.bySource, src)
	}
}

// logRefusal decides whether a refusal is logged (at most once per
// LogWindow) and returns what writes the line, or nothing.
func (l *Listener) logRefusal(why Reason, src string) (write func()) {
	if l.cfg.Logger == nil {
		return func() {}
	}
	now := l.cfg.Clock.Now()
	l.mu.Lock()
	if !l.lastLog.IsZero() && now.Sub(l.lastLog) < LogWindow {
		l.quiet++
		l.mu.Unlock()
		return func() {}
	}
	quiet := l.quiet
	l.lastLog, l.quiet = now, 0
	open := l.open
	l.mu.Unlock()
	lim := l.cfg.Limits
	return func() {
		l.cfg.Logger.Warn("connection refused: over the cap", "listener", l.cfg.Name, "source", src, "cap", string(why),
			"per_source", lim.PerSource, "total", lim.Total, "open", open, "suppressed", quiet)
	}
}

// Open is the number of connections open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// OpenFrom is the number of connections open now from the source src
// (as Source gives it).
func (l *Listener) OpenFrom(src string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bySource[src]
}

// Refused is the number of connections closed at accept, by reason.
func (l *Listener) Refused(why Reason) uint64 { return l.refused[reasonIndex(why)].Load() }

// Name is the listener's name from its Config.
func (l *Listener) Name() string { return l.cfg.Name }

// Source is the key a connection from addr counts under: its IP address
// (an IPv4-mapped IPv6 address as IPv4), or "" when it has none.
func Source(addr net.Addr) string {
	var ap netip.AddrPort
	switch a := addr.(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	case *net.UDPAddr:
		ap = a.AddrPort()
	default:
		if addr == nil {
			return ""
		}
		p, err := netip.ParseAddrPort(addr.String())
		if err != nil {
			return ""
		}
		ap = p
	}
	if !ap.Addr().IsValid() {
		return ""
	}
	return ap.Addr().Unmap().WithZone("").String()
}

// Conn is a connection the Listener counts until its first Close.
type Conn struct {
	net.Conn
	l      *Listener
	src    string
	closed atomic.Bool
}

// Close closes the connection and, the first time, uncounts it.
func (c *Conn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.src)
	}
	return err
}

// NetConn is the wrapped connection (a *net.TCPConn for a TCP listener),
// for what needs its socket: setting options as the server behind would.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// CloseWrite shuts the writing side when the wrapped connection can
// (net/http uses it to end a response cleanly).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
