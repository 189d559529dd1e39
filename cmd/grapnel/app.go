package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/rpc/client"
)

// Environment variables that preset the global flags.
const (
	envServerURL = "GRAPNEL_SERVER_URL"
	envInsecure  = "GRAPNEL_INSECURE"
	envCAPem     = "GRAPNEL_CA_PEM"
	envCrtPem    = "GRAPNEL_CRT_PEM"
	envKeyPem    = "GRAPNEL_KEY_PEM"
)

// conn is an open server connection.
type conn interface {
	cli.Conn
	Close() error
}

// app holds what the flags of one invocation set.
type app struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	dial   func(context.Context, client.Options) (conn, error)

	global    cli.GlobalOptions
	timeoutMs int
	envErr    error // a malformed environment variable, reported when a command runs

	output         string
	filter         cli.WorkloadFilter
	watch          bool
	includeCurrent bool
	applyAgent     string
	applyDelete    bool
	runSpec        cli.RunSpec
	runTags        []string
	logs           cli.LogsOptions
}

func newApp(getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		getenv: getenv,
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		dial: func(ctx context.Context, o client.Options) (conn, error) {
			return client.Dial(ctx, o)
		},
	}
}

// envDefault returns the environment's value for a flag, or def.
func (a *app) envDefault(key, def string) string {
	if v := a.getenv(key); v != "" {
		return v
	}
	return def
}

// envBool reads a boolean environment variable; a malformed value is kept
// as an error for when a command runs.
func (a *app) envBool(key string) bool {
	v := a.getenv(key)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.envErr = fmt.Errorf("%s: '%s' is not a boolean (use true or false)", key, v)
		return false
	}
	return b
}

// clientOptions checks the global flags and environment and turns them
// into connection options, printing a warning the options call for.
func (a *app) clientOptions() (client.Options, error) {
	if a.envErr != nil {
		return client.Options{}, a.envErr
	}
	if a.timeoutMs <= 0 {
		return client.Options{}, fmt.Errorf("--response-timeout must be a positive number of milliseconds, not %d", a.timeoutMs)
	}
	a.global.ResponseTimeout = time.Duration(a.timeoutMs) * time.Millisecond
	o, warning, err := a.global.ClientOptions()
	if err != nil {
		return client.Options{}, err
	}
	if warning != "" {
		fmt.Fprintf(a.stderr, "warning: %s\n", warning)
	}
	return o, nil
}

// session connects and returns a session for one command, and the
// function that closes it.
func (a *app) session(ctx context.Context) (*cli.Session, func(), error) {
	o, err := a.clientOptions()
	if err != nil {
		return nil, nil, err
	}
	c, err := a.dial(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	terminal := isTerminal(a.stdout)
	width := 0
	if terminal {
		if f, ok := a.stdout.(*os.File); ok {
			width = terminalWidth(f)
		}
	}
	s := &cli.Session{
		Conn:     c,
		In:       a.stdin,
		Out:      a.stdout,
		Err:      a.stderr,
		Terminal: terminal,
		Width:    width,
		NoWait:   a.global.NoWait,
		Quiet:    a.global.Quiet,
		Verbose:  a.global.Verbose,
		Timeout:  a.global.ResponseTimeout,
	}
	return s, func() { c.Close() }, nil
}

// with runs f in a fresh session.
func (a *app) with(ctx context.Context, f func(*cli.Session) error) error {
	s, closeFn, err := a.session(ctx)
	if err != nil {
		return err
	}
	defer closeFn()
	return f(s)
}
