package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/internal/ankconf"
	"github.com/grapnel-io/grapnel/rpc/client"
	"github.com/grapnel-io/grapnel/rpc/grapnelpb"
)

// Environment variables that preset the global flags.
const (
	envServerURL = "GRAPNEL_SERVER_URL"
	envInsecure  = "GRAPNEL_INSECURE"
	envOwner     = "GRAPNEL_OWNER"
	envCAPem     = "GRAPNEL_CA_PEM"
	envCrtPem    = "GRAPNEL_CRT_PEM"
	envKeyPem    = "GRAPNEL_KEY_PEM"
)

// The Ankaios CLI's names of the same variables; the GRAPNEL_ ones win.
const (
	ankServerURL = "ANK_SERVER_URL"
	ankInsecure  = "ANK_INSECURE"
	ankCAPem     = "ANK_CA_PEM"
	ankCrtPem    = "ANK_CRT_PEM"
	ankKeyPem    = "ANK_KEY_PEM"
)

// defaultTimeoutMs is the default --response-timeout, as in ank.
const defaultTimeoutMs = 3000

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

	// flags is what the global flags say, global what a command uses:
	// the flags that were given over the environment over the Ankaios
	// CLI config file over the defaults (resolve).
	flags     cli.GlobalOptions
	timeoutMs int
	ankConfig string
	global    cli.GlobalOptions
	// flagSet holds the global flags; serverURLFlags are every flag that
	// sets the server URL (the global one and the local --server-url of
	// the commands where -s means something else).
	flagSet        *pflag.FlagSet
	serverURLFlags []*pflag.Flag
	// systemCLIConfig and systemAnkConfig are the system-wide Grapnel
	// and Ankaios CLI config files (ankConfigFile).
	systemCLIConfig string
	systemAnkConfig string

	output string
	// agentsOutput is `get agents -o`: its own field, for its default differs.
	agentsOutput string
	// workloadsOutput and configsOutput are `get workloads -o` and `get
	// configs -o`, table by default.
	workloadsOutput string
	configsOutput   string
	filter          cli.WorkloadFilter
	watch           bool
	includeCurrent  bool
	applyAgent      string
	applyDelete     bool
	dryRun          bool
	expectSeq       uint64
	expectRevision  uint64
	lockTTL         time.Duration
	lockReason      string
	unlockForce     bool
	planOutput      string
	runSpec         cli.RunSpec
	runTags         []string
	logs            cli.LogsOptions
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
		systemCLIConfig: cliSystemPath,
		systemAnkConfig: ankconf.CLISystemPath,
	}
}

// changed reports whether the global flag name was given.
func (a *app) changed(name string) bool {
	if name == "server-url" {
		for _, f := range a.serverURLFlags {
			if f.Changed {
				return true
			}
		}
		return false
	}
	f := a.flagSet.Lookup(name)
	return f != nil && f.Changed
}

// resolve sets a.global from its layers, lowest first: the defaults, the
// Ankaios CLI config file, the ANK_ variables, the GRAPNEL_ variables and
// the flags that were given. An empty variable counts as not set.
func (a *app) resolve() error {
	g := cli.GlobalOptions{ServerURL: cli.DefaultServerURL}
	timeoutMs := int64(defaultTimeoutMs)
	f, err := a.ankConfigFile()
	if err != nil {
		return err
	}
	if f != nil {
		f.Set(map[string]any{
			"server_url": &g.ServerURL, "ca_pem": &g.CAPem, "crt_pem": &g.CrtPem, "key_pem": &g.KeyPem,
			"ca_pem_content": &g.CAPemContent, "crt_pem_content": &g.CrtPemContent, "key_pem_content": &g.KeyPemContent,
			"insecure": &g.Insecure, "verbose": &g.Verbose, "quiet": &g.Quiet, "no_wait": &g.NoWait,
		})
		if v, ok := f.Uint("response_timeout"); ok {
			if v == 0 || v > math.MaxInt64/uint64(time.Millisecond) {
				return f.Fail(ankconf.CLI.What, "response_timeout", "%d: must be a positive number of milliseconds", v)
			}
			timeoutMs = int64(v)
		}
		for _, w := range f.Warnings {
			fmt.Fprintf(a.stderr, "warning: %s\n", w)
		}
	}
	for _, v := range []struct {
		vars [2]string
		dst  *string
	}{
		{[2]string{ankServerURL, envServerURL}, &g.ServerURL},
		{[2]string{ankCAPem, envCAPem}, &g.CAPem},
		{[2]string{ankCrtPem, envCrtPem}, &g.CrtPem},
		{[2]string{ankKeyPem, envKeyPem}, &g.KeyPem},
	} {
		for _, name := range v.vars {
			if s := a.getenv(name); s != "" {
				*v.dst = s
			}
		}
	}
	for _, name := range []string{ankInsecure, envInsecure} {
		if s := a.getenv(name); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return fmt.Errorf("%s: '%s' is not a boolean (use true or false)", name, s)
			}
			g.Insecure = b
		}
	}
	for name, p := range map[string][2]*string{
		"server-url": {&g.ServerURL, &a.flags.ServerURL}, "ca_pem": {&g.CAPem, &a.flags.CAPem},
		"crt_pem": {&g.CrtPem, &a.flags.CrtPem}, "key_pem": {&g.KeyPem, &a.flags.KeyPem},
	} {
		if a.changed(name) {
			*p[0] = *p[1]
		}
	}
	for name, p := range map[string][2]*bool{
		"insecure": {&g.Insecure, &a.flags.Insecure}, "verbose": {&g.Verbose, &a.flags.Verbose},
		"quiet": {&g.Quiet, &a.flags.Quiet}, "no-wait": {&g.NoWait, &a.flags.NoWait},
	} {
		if a.changed(name) {
			*p[0] = *p[1]
		}
	}
	g.Owner = a.defaultOwner()
	if s := a.getenv(envOwner); s != "" {
		g.Owner = s
	}
	if a.changed("owner") {
		g.Owner = a.flags.Owner
	}
	if a.changed("response-timeout") {
		if a.timeoutMs <= 0 {
			return fmt.Errorf("--response-timeout must be a positive number of milliseconds, not %d", a.timeoutMs)
		}
		timeoutMs = int64(a.timeoutMs)
	}
	g.ResponseTimeout = time.Duration(timeoutMs) * time.Millisecond
	a.global = g
	return nil
}

// defaultOwner is the lock owner a CLI declares when none is given:
// USER@HOST. The user is $USER, else $USERNAME, else the account of the
// process's uid (os/user), else "uid<N>"; the host is the host name, else
// "localhost". Clients on a host without $USER (services, cron,
// containers) would otherwise all share the bare host name. Without TLS
// it is what the server goes by; it is a label, not an authentication
// (docs/locks.md).
func (a *app) defaultOwner() string {
	return ownerOf(a.getenv, user.Current, os.Hostname, os.Getuid)
}

// ownerOf is defaultOwner with its sources given.
func ownerOf(getenv func(string) string, current func() (*user.User, error), hostname func() (string, error), getuid func() int) string {
	name := getenv("USER")
	if name == "" {
		name = getenv("USERNAME")
	}
	if name == "" {
		if u, err := current(); err == nil && u.Username != "" {
			name = u.Username
		}
	}
	if name == "" {
		name = "uid" + strconv.Itoa(getuid())
	}
	host, err := hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return name + "@" + host
}

// The CLI's own config file (YAML, the keys of ank.conf): under $HOME,
// then the system one; read before the Ankaios files.
const (
	cliUserPath   = ".config/grapnel/cli.yaml"
	cliSystemPath = "/etc/grapnel/cli.yaml"
	cliWhat       = "grapnel CLI config"
)

// ankConfigFile reads the CLI config file: the one -x/--ank-config names
// (Ankaios TOML or Grapnel YAML, as ankconf.IsTOML tells), else the first
// of $HOME/.config/grapnel/cli.yaml, /etc/grapnel/cli.yaml,
// $HOME/.config/ankaios/ank.conf and /etc/ankaios/ank.conf that exists
// (nil when none does).
func (a *app) ankConfigFile() (*ankconf.File, error) {
	// read reads one file in the format its name (or content) says; an
	// absent file that nobody named is skipped (nil, nil).
	read := func(path string, named bool) (*ankconf.File, error) {
		data, err := os.ReadFile(path)
		toml := ankconf.IsTOML(path, data)
		switch {
		case err == nil && toml:
			return ankconf.Parse(ankconf.CLI, path, data)
		case err == nil:
			return ankconf.ParseYAML(ankconf.CLI, cliWhat, path, data)
		case !named && errors.Is(err, os.ErrNotExist):
			return nil, nil
		case toml:
			return nil, &ankconf.Error{What: ankconf.CLI.What, Path: path, Reason: err.Error()}
		}
		return nil, &ankconf.Error{What: cliWhat, Path: path, Reason: err.Error()}
	}
	if a.changed("ank-config") {
		return read(a.ankConfig, true)
	}
	var paths []string
	home := a.getenv("HOME")
	if home != "" {
		paths = append(paths, filepath.Join(home, cliUserPath))
	}
	paths = append(paths, a.systemCLIConfig)
	if home != "" {
		paths = append(paths, filepath.Join(home, ankconf.CLIUserPath))
	}
	for _, p := range append(paths, a.systemAnkConfig) {
		if f, err := read(p, false); f != nil || err != nil {
			return f, err
		}
	}
	return nil, nil
}

// clientOptions resolves the global options and turns them into
// connection options, printing a warning the options call for.
func (a *app) clientOptions() (client.Options, error) {
	if err := a.resolve(); err != nil {
		return client.Options{}, err
	}
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
	var plan grapnelpb.PlanClient
	if p, ok := c.(interface{ Plan() grapnelpb.PlanClient }); ok {
		plan = p.Plan()
	}
	var cluster grapnelpb.ClusterClient
	if p, ok := c.(interface {
		Cluster() grapnelpb.ClusterClient
	}); ok {
		cluster = p.Cluster()
	}
	var locks grapnelpb.LocksClient
	if l, ok := c.(interface{ Locks() grapnelpb.LocksClient }); ok {
		locks = l.Locks()
	}
	s := &cli.Session{
		Plan:     plan,
		Cluster:  cluster,
		Locks:    locks,
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
	type reconnecter interface {
		Reconnect(context.Context) (*client.Conn, error)
	}
	if _, ok := c.(reconnecter); ok {
		// Through the connection in use, which owns the Resolver.
		s.Reconnect = func(ctx context.Context) (cli.Conn, error) { return s.Conn.(reconnecter).Reconnect(ctx) }
	}
	// A streaming command may have resumed on a new connection
	// (Session.Reconnect): close the one it ends with.
	return s, func() {
		if cl, ok := s.Conn.(io.Closer); ok {
			cl.Close()
		}
	}, nil
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
