// Package logbridge puts the libraries' log lines (hashicorp/raft and
// raft-wal through hclog, memberlist through a standard *log.Logger) onto
// the process's slog handler, so that a replica writes one format: the
// library's name becomes the attribute component, its levels slog's.
//
// Libraries repeat an error for as long as its cause lasts: a leader
// whose peer is off logs "failed to heartbeat to" about every 0.4 s, some
// 9,000 lines an hour. Warnings and errors with the same component,
// message and peer are therefore written at once the first time, then at
// most once a Window with the number left out since (internal/ratelog).
//
// It is a leaf package: it imports nothing of ours but internal/clock
// and internal/ratelog.
package logbridge

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/grapnel-io/grapnel/internal/clock"
	"github.com/grapnel-io/grapnel/internal/ratelog"
)

// DefaultWindow is how often a repeated library warning or error is
// written at most: once a window, with the count of those left out.
const DefaultWindow = 30 * time.Second

// Options configure a bridge.
type Options struct {
	// Level is the least level passed on (hclog's names: "trace",
	// "debug", "info", "warn", "error"; "warn" when empty). The handler
	// filters on its own level too.
	Level string
	// Window is DefaultWindow when zero.
	Window time.Duration
	// Clock drives the window (the real clock when nil).
	Clock clock.Clock
	// Unlimited names the components whose warnings and errors are never
	// held back ("" is the logger without a name): a caller's own lines,
	// which say what they mean once per event and may name the peer
	// otherwise than "peer".
	Unlimited []string
}

// bridge is what a logger tree shares: the handler, the level and the
// limiter of repeats.
type bridge struct {
	log       *slog.Logger
	level     atomic.Int32 // an hclog.Level
	limiter   *ratelog.Limiter
	unlimited []string
}

// Logger is an hclog.Logger writing onto a slog handler.
type Logger struct {
	b    *bridge
	name string
	args []any // the With arguments, hclog's alternating keys and values
}

var _ hclog.Logger = (*Logger)(nil)

// New returns an hclog.Logger without a name that writes to h.
func New(h slog.Handler, o Options) *Logger {
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	b := &bridge{log: slog.New(h), limiter: ratelog.New(o.Clock, o.Window), unlimited: o.Unlimited}
	lvl := hclog.Warn
	if o.Level != "" {
		lvl = hclog.LevelFromString(o.Level)
		if lvl == hclog.NoLevel {
			lvl = hclog.Warn
		}
	}
	b.level.Store(int32(lvl))
	return &Logger{b: b}
}

// slogLevel maps hclog's levels onto slog's; trace is below debug.
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (l *Logger) enabled(level hclog.Level) bool {
	if level == hclog.Off || level < hclog.Level(l.b.level.Load()) {
		return false
	}
	return l.b.log.Enabled(context.Background(), slogLevel(level))
}

// Log writes msg with args (alternating keys and values, hclog's way).
func (l *Logger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.NoLevel || level == hclog.DefaultLevel {
		level = hclog.Info
	}
	if !l.enabled(level) {
		return
	}
	attrs := make([]any, 0, 2+len(l.args)+len(args))
	if l.name != "" {
		attrs = append(attrs, slog.String("component", l.name))
	}
	attrs = appendArgs(attrs, l.args)
	attrs = appendArgs(attrs, args)
	sl := slogLevel(level)
	if level < hclog.Warn || slices.Contains(l.b.unlimited, l.name) {
		l.b.log.Log(context.Background(), sl, msg, attrs...)
		return
	}
	key := l.name + "\x00" + level.String() + "\x00" + msg + "\x00" + peerOf(l.args, args)
	l.b.limiter.Log(l.b.log, sl, key, msg, attrs...)
}

// peerOf is the value of the peer argument (hashicorp/raft's name for the
// other replica), "" without one: a repeat is the same message about the
// same peer, whatever its error says.
func peerOf(lists ...[]any) string {
	for _, args := range lists {
		for i := 0; i+1 < len(args); i += 2 {
			if k, ok := args[i].(string); ok && k == "peer" {
				return fmt.Sprint(args[i+1])
			}
		}
	}
	return ""
}

// appendArgs turns hclog's alternating keys and values into slog
// attributes; keys get underscores for spaces (raft says "backoff time").
func appendArgs(attrs []any, args []any) []any {
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			attrs = append(attrs, slog.Any("EXTRA_VALUE_AT_END", args[i]))
			break
		}
		key := strings.ReplaceAll(fmt.Sprint(args[i]), " ", "_")
		attrs = append(attrs, slog.Any(key, value(args[i+1])))
	}
	return attrs
}

// value renders hclog's formatting wrappers as hclog would.
func value(v any) any {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) > 0 {
			if f, ok := v[0].(string); ok {
				return fmt.Sprintf(f, v[1:]...)
			}
		}
		return fmt.Sprint(v...)
	case hclog.Hex:
		return fmt.Sprintf("0x%x", int(v))
	case hclog.Octal:
		return fmt.Sprintf("0%o", int(v))
	case hclog.Binary:
		return fmt.Sprintf("0b%b", int(v))
	case hclog.Quote:
		return fmt.Sprintf("%q", string(v))
	case error:
		return v.Error()
	case fmt.Stringer:
		return v.String()
	}
	return v
}

func (l *Logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *Logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *Logger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *Logger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *Logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *Logger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *Logger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *Logger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *Logger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *Logger) IsError() bool { return l.enabled(hclog.Error) }

// ImpliedArgs are the With arguments.
func (l *Logger) ImpliedArgs() []any { return append([]any(nil), l.args...) }

// With returns a logger that adds args to every line.
func (l *Logger) With(args ...any) hclog.Logger {
	return &Logger{b: l.b, name: l.name, args: append(append([]any(nil), l.args...), args...)}
}

// Name is the dotted name, the component attribute of every line.
func (l *Logger) Name() string { return l.name }

// Named returns a logger named name below this one.
func (l *Logger) Named(name string) hclog.Logger {
	if l.name != "" {
		name = l.name + "." + name
	}
	return &Logger{b: l.b, name: name, args: l.args}
}

// ResetNamed returns a logger named name alone.
func (l *Logger) ResetNamed(name string) hclog.Logger {
	return &Logger{b: l.b, name: name, args: l.args}
}

// SetLevel sets the least level of every logger of this tree.
func (l *Logger) SetLevel(level hclog.Level) { l.b.level.Store(int32(level)) }

// GetLevel is the least level passed on.
func (l *Logger) GetLevel() hclog.Level { return hclog.Level(l.b.level.Load()) }

// StandardLogger returns a *log.Logger onto this logger, for libraries
// that take one (memberlist).
func (l *Logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer that logs each line written to it. It
// reads the level from the line's "[LEVEL]" prefix (memberlist's "[ERR]
// memberlist: ..."), and a "memberlist: " after it names the component.
// Lines without one are at opts.ForceLevel, or info.
func (l *Logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	w := &lineWriter{l: l, level: hclog.Info}
	if opts != nil && opts.ForceLevel != hclog.NoLevel {
		w.level = opts.ForceLevel
	}
	return w
}

type lineWriter struct {
	l     *Logger
	level hclog.Level
}

func (w *lineWriter) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		level, component, msg := ParseLine(line)
		if level == hclog.NoLevel {
			level = w.level
		}
		l := w.l
		if component != "" && l.name != component && !strings.HasSuffix(l.name, "."+component) {
			l = l.Named(component).(*Logger)
		}
		l.Log(level, msg)
	}
	return len(p), nil
}

// ParseLine reads a standard-logger line of memberlist's form, "[LEVEL]
// component: message", into its level (NoLevel without a prefix), the
// component ("" without a level or one) and the message.
func ParseLine(line string) (hclog.Level, string, string) {
	line = strings.TrimSpace(line)
	level := hclog.NoLevel
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			switch strings.ToUpper(line[1:end]) {
			case "TRACE":
				level = hclog.Trace
			case "DEBUG":
				level = hclog.Debug
			case "INFO":
				level = hclog.Info
			case "WARN", "WARNING":
				level = hclog.Warn
			case "ERR", "ERROR":
				level = hclog.Error
			}
			if level != hclog.NoLevel {
				line = strings.TrimSpace(line[end+1:])
			}
		}
	}
	component := ""
	if i := strings.Index(line, ": "); level != hclog.NoLevel && i > 0 && !strings.ContainsAny(line[:i], " \t[]=") {
		component, line = line[:i], line[i+2:]
	}
	return level, component, line
}
