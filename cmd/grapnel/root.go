package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/grapnel-io/grapnel/cli"
	"github.com/grapnel-io/grapnel/internal/ankconf"
	"github.com/grapnel-io/grapnel/internal/buildinfo"
	"github.com/grapnel-io/grapnel/internal/formats"
	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/state"
)

const serverURLUsage = "replica addresses host:port, comma-separated, tried in order (env " + envServerURL + " or " + ankServerURL + ") (default \"" + cli.DefaultServerURL + "\")"

// newRoot builds the command tree; the flags write into a.
func newRoot(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "grapnel",
		Short: "Command line for a Grapnel cluster (the Ankaios ank verbs)",
		Long: "Command line for a Grapnel cluster (the Ankaios ank verbs).\n\n" +
			"The same binary runs the replica as `grapnel server [flags]` (or started as grapnel-server) and the agent as\n" +
			"`grapnel agent [flags]` (or started as grapnel-agent); `grapnel server --help` and `grapnel agent --help` list\n" +
			"their flags. `grapnel agent resync|maintenance|disable|activate NAME` are this command line's (`grapnel help agent`).",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	// The flags' defaults are the built-in ones: the environment and the
	// Ankaios CLI config file come in below the flags given (resolve).
	pf := root.PersistentFlags()
	a.flagSet = pf
	pf.StringVarP(&a.flags.ServerURL, "server-url", "s", "", serverURLUsage)
	a.serverURLFlags = append(a.serverURLFlags, pf.Lookup("server-url"))
	pf.BoolVarP(&a.flags.Insecure, "insecure", "k", false, "connect without TLS (env "+envInsecure+" or "+ankInsecure+")")
	pf.StringVar(&a.flags.CAPem, "ca_pem", "", "CA certificate PEM file (env "+envCAPem+" or "+ankCAPem+")")
	pf.StringVar(&a.flags.CrtPem, "crt_pem", "", "client certificate PEM file (env "+envCrtPem+" or "+ankCrtPem+")")
	pf.StringVar(&a.flags.KeyPem, "key_pem", "", "client private key PEM file (env "+envKeyPem+" or "+ankKeyPem+")")
	pf.StringVar(&a.flags.Owner, "owner", "", "lock owner to act as, without a client certificate (env "+envOwner+"; default USER@HOST); a label, not an authentication (Grapnel only)")
	pf.IntVar(&a.timeoutMs, "response-timeout", defaultTimeoutMs, "milliseconds to wait for the server's answer")
	pf.BoolVar(&a.flags.NoWait, "no-wait", false, "do not wait for workloads to reach their states after a change")
	pf.BoolVarP(&a.flags.Verbose, "verbose", "v", false, "print debug information on stderr")
	pf.BoolVarP(&a.flags.Quiet, "quiet", "q", false, "print only the requested data")
	pf.StringVarP(&a.ankConfig, "ank-config", "x", "", "CLI config file: Ankaios TOML (.conf, .toml) or Grapnel YAML, the same keys (default the first present of $HOME/"+cliUserPath+", "+cliSystemPath+", $HOME/"+ankconf.CLIUserPath+", "+ankconf.CLISystemPath+")")
	// --version: the version line, then the formats of the release
	// (internal/formats), as grapnel-server and grapnel-agent print them.
	root.Version = buildinfo.Describe(rpc.ProtocolVersion)
	root.SetVersionTemplate("{{.Name}} {{.Version}}\n" + formats.Text())
	root.Flags().BoolP("version", "V", false, "print the version and exit")

	root.AddCommand(newGet(a), newSet(a), newDelete(a), newRun(a), newApply(a), newLogs(a), newCluster(a), newAgent(a), newHistory(a),
		newLock(a), newUnlock(a), newCerts(a))
	refuseUnknownSubcommands(root)
	completeOutputs(root)
	return root
}

// refuseUnknownSubcommands makes every command that only groups others
// (get, cluster, agent, ...) refuse a word that names none of them, with
// cobra's suggestions, and exit non-zero, as ank does: cobra itself
// checks unknown commands only at the root, and below it printed the
// group's help and exited 0 (`grapnel get wokloads`). Alone, a group
// still prints its help.
func refuseUnknownSubcommands(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		refuseUnknownSubcommands(c)
	}
	if cmd == cmd.Root() || !cmd.HasSubCommands() || cmd.Run != nil || cmd.RunE != nil {
		return
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.SuggestionsMinimumDistance = 2
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return fmt.Errorf("%s\nRun '%s --help' for usage", msg, c.CommandPath())
	}
}

// shadowServerURL gives cmd a local --server-url without shorthand, so
// that -s can mean something else there (--state, --since), as in ank. It
// writes the same field as the global flag; a -s before the subcommand
// still means the server (see spellOutGlobalS).
func shadowServerURL(a *app, cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.flags.ServerURL, "server-url", "", serverURLUsage)
	a.serverURLFlags = append(a.serverURLFlags, cmd.Flags().Lookup("server-url"))
}

func newGet(a *app) *cobra.Command {
	get := &cobra.Command{Use: "get", Short: "Show the state, workloads, agents, configs, events, problems or the dependency graph"}

	stateCmd := &cobra.Command{
		Use:               "state [MASK...]",
		Short:             "Print the complete state, or the parts the field masks select",
		ValidArgsFunction: a.completeMasks,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := cli.ParseFormat(a.output)
			if err != nil {
				return err
			}
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.GetState(cmd.Context(), args, f) })
		},
	}
	stateCmd.Flags().StringVarP(&a.output, "output", "o", "yaml", "output format: yaml or json")

	workloads := &cobra.Command{
		Use:               "workloads [NAME...]",
		Aliases:           []string{"workload"},
		Short:             "List workloads and their execution states",
		ValidArgsFunction: a.completeNames(desiredWorkloads),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.filter.Names = args
			a.warnServerLike("get workloads", "state", a.filter.State)
			if err := cli.CheckListOutput(a.workloadsOutput); err != nil {
				return err
			}
			if a.watch && (a.workloadsOutput == "json" || a.workloadsOutput == "yaml") {
				return fmt.Errorf("%w: -o %s goes with a listing, not with --watch", cli.ErrBadArgument, a.workloadsOutput)
			}
			return a.with(cmd.Context(), func(s *cli.Session) error {
				if a.watch {
					return s.WatchWorkloads(cmd.Context(), a.filter)
				}
				return s.GetWorkloads(cmd.Context(), a.filter, a.workloadsOutput)
			})
		},
	}
	workloads.Flags().StringVarP(&a.filter.Agent, "agent", "a", "", "only workloads on this agent")
	_ = workloads.RegisterFlagCompletionFunc("agent", a.completeFlagName(connectedAgents))
	workloads.Flags().StringVarP(&a.filter.State, "state", "s", "", "only workloads in this execution state, e.g. running or Pending(Starting)")
	workloads.Flags().BoolVarP(&a.watch, "watch", "w", false, "keep the table current until Ctrl-C")
	_ = workloads.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{
		string(state.StateAgentDisconnected), string(state.StatePending), string(state.StateRunning), string(state.StateStopping),
		string(state.StateSucceeded), string(state.StateFailed), string(state.StateNotScheduled), string(state.StateRemoved),
	}, cobra.ShellCompDirectiveNoFileComp))
	workloads.Flags().StringVarP(&a.workloadsOutput, "output", "o", "table", "output format: table, json or yaml (Grapnel only)")
	shadowServerURL(a, workloads)

	agents := &cobra.Command{
		Use:     "agents",
		Aliases: []string{"agent"},
		Short:   "List connected agents",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckListOutput(a.agentsOutput); err != nil {
				return err
			}
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.GetAgents(cmd.Context(), a.agentsOutput) })
		},
	}
	agents.Flags().StringVarP(&a.agentsOutput, "output", "o", "table", "output format: table, json or yaml (Grapnel only)")

	configs := &cobra.Command{
		Use:     "configs",
		Aliases: []string{"config"},
		Short:   "List config items",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckListOutput(a.configsOutput); err != nil {
				return err
			}
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.GetConfigs(cmd.Context(), a.configsOutput) })
		},
	}
	configs.Flags().StringVarP(&a.configsOutput, "output", "o", "table", "output format: table, json or yaml (Grapnel only)")

	events := &cobra.Command{
		Use:               "events [MASK...]",
		Short:             "Print state changes under the field masks as they happen, until Ctrl-C",
		ValidArgsFunction: a.completeMasks,
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := cli.ParseFormat(a.output)
			if err != nil {
				return err
			}
			return a.with(cmd.Context(), func(s *cli.Session) error {
				return s.GetEvents(cmd.Context(), args, f, a.includeCurrent)
			})
		},
	}
	events.Flags().StringVarP(&a.output, "output", "o", "yaml", "output format: yaml or json")
	events.Flags().BoolVarP(&a.includeCurrent, "include-current-state", "c", false, "print the current state first")

	get.AddCommand(stateCmd, workloads, agents, configs, events, newGetGraph(a), newTimeline(a), newGetLocks(a))
	get.AddCommand(newGetProblems(a))
	return get
}

func newSet(a *app) *cobra.Command {
	set := &cobra.Command{Use: "set", Short: "Change the state"}
	stateCmd := &cobra.Command{
		Use:   "state MASK... FILE|-",
		Short: "Update the state at the field masks from a CompleteState-shaped YAML file (or stdin)",
		Args:  cobra.MinimumNArgs(2),
		// Masks, and file names where no mask fits: the last argument is
		// the file.
		ValidArgsFunction: func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
			masks, d := a.completeMasks(cmd, args, prefix)
			return masks, d &^ cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			masks, file := args[:len(args)-1], args[len(args)-1]
			return a.withPlan(cmd, func(s *cli.Session) error { return s.SetState(cmd.Context(), masks, file) })
		},
	}
	planFlags(a, stateCmd)
	set.AddCommand(stateCmd)
	return set
}

// planFlags adds the flags of the commands that can plan their update
// instead of making it (Grapnel only). The plan names the desired
// state's revision it was made at (the number `get state` prints), not a
// history transaction: --plan-revision applies it there. --expect-seq,
// its name before, stays as a hidden alias for the scripts that use it.
func planFlags(a *app, cmd *cobra.Command) {
	planOnlyFlags(a, cmd)
	revisionFlag(a, cmd)
}

// planOnlyFlags are planFlags without --expect-revision, for commands
// whose parent has it (delete).
func planOnlyFlags(a *app, cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&a.dryRun, "dry-run", false, "print the plan of the update (what it adds, updates and deletes, in which order, or why it would be rejected) without making it (Grapnel only)")
	f.Uint64Var(&a.expectSeq, flagPlanRevision, 0, "make the update only if the desired state is still at this revision, the one a dry-run's plan names (Grapnel only)")
	f.Uint64Var(&a.expectSeq, flagExpectSeq, 0, "the former name of --"+flagPlanRevision)
	_ = f.MarkHidden(flagExpectSeq)
	f.StringVarP(&a.planOutput, "output", "o", cli.PlanTable, "output format of --dry-run: table, yaml or json")
}

// The flag that applies a plan at its revision, and its former name.
const (
	flagPlanRevision = "plan-revision"
	flagExpectSeq    = "expect-seq"
)

// withPlan runs f in a fresh session set up with the plan flags of cmd.
func (a *app) withPlan(cmd *cobra.Command, f func(*cli.Session) error) error {
	out, err := cli.ParsePlanOutput(a.planOutput)
	if err != nil {
		return err
	}
	expect := cmd.Flags().Changed(flagPlanRevision) || cmd.Flags().Changed(flagExpectSeq)
	if cmd.Flags().Changed(flagPlanRevision) && cmd.Flags().Changed(flagExpectSeq) {
		return fmt.Errorf("%w: --%s and --%s are one flag: give it once", cli.ErrBadArgument, flagPlanRevision, flagExpectSeq)
	}
	if a.dryRun && expect {
		return fmt.Errorf("%w: --dry-run and --%s: plan first, then apply with the revision the plan names", cli.ErrBadArgument, flagPlanRevision)
	}
	if cmd.Flags().Changed("expect-revision") && (a.dryRun || expect) {
		return fmt.Errorf("%w: --expect-revision goes with neither --dry-run nor --%s", cli.ErrBadArgument, flagPlanRevision)
	}
	if cmd.Flags().Changed("output") && !a.dryRun {
		return fmt.Errorf("%w: -o applies to --dry-run only", cli.ErrBadArgument)
	}
	return a.withRevision(cmd, func(s *cli.Session) error {
		s.DryRun, s.PlanOutput = a.dryRun, out
		if expect {
			seq := a.expectSeq
			s.ExpectSeq = &seq
		}
		return f(s)
	})
}

// revisionFlag adds --expect-revision to an update command.
func revisionFlag(a *app, cmd *cobra.Command) {
	cmd.Flags().Uint64Var(&a.expectRevision, "expect-revision", 0, "make the update only if what it changes is unchanged since this revision, the one get state prints (Grapnel only)")
}

// withRevision runs f in a fresh session with the --expect-revision of
// cmd, if given.
func (a *app) withRevision(cmd *cobra.Command, f func(*cli.Session) error) error {
	return a.with(cmd.Context(), func(s *cli.Session) error {
		if cmd.Flags().Changed("expect-revision") {
			rev := a.expectRevision
			s.ExpectRevision = &rev
		}
		return f(s)
	})
}

func newDelete(a *app) *cobra.Command {
	del := &cobra.Command{Use: "delete", Short: "Remove workloads or config items"}
	del.PersistentFlags().Uint64Var(&a.expectRevision, "expect-revision", 0, "delete only if what is deleted is unchanged since this revision, the one get state prints (Grapnel only)")
	workloads := &cobra.Command{
		Use:               "workloads NAME...",
		Aliases:           []string{"workload"},
		Short:             "Delete workloads and wait until they are removed",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeNames(desiredWorkloads),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withPlan(cmd, func(s *cli.Session) error { return s.DeleteWorkloads(cmd.Context(), args) })
		},
	}
	configs := &cobra.Command{
		Use:               "configs NAME...",
		Aliases:           []string{"config"},
		Short:             "Delete config items",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeNames(desiredConfigs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withPlan(cmd, func(s *cli.Session) error { return s.DeleteConfigs(cmd.Context(), args) })
		},
	}
	planOnlyFlags(a, workloads)
	planOnlyFlags(a, configs)
	del.AddCommand(workloads, configs)
	return del
}

func newRun(a *app) *cobra.Command {
	runCmd := &cobra.Command{Use: "run", Short: "Start a workload"}
	wl := &cobra.Command{
		Use:   "workload NAME",
		Short: "Add (or replace) one workload and wait until it runs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tags, err := cli.ParseTags(a.runTags)
			if err != nil {
				return err
			}
			spec := a.runSpec
			spec.Name = args[0]
			spec.Tags = tags
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.RunWorkload(cmd.Context(), spec) })
		},
	}
	f := wl.Flags()
	f.StringVar(&a.runSpec.Runtime, "runtime", "", "runtime, e.g. podman")
	f.StringVar(&a.runSpec.RuntimeConfig, "config", "", "runtime config (a YAML string)")
	f.StringVar(&a.runSpec.Agent, "agent", "", "agent to run on")
	f.StringArrayVar(&a.runTags, "tags", nil, "tag key=value (repeatable)")
	_ = wl.RegisterFlagCompletionFunc("agent", a.completeFlagName(connectedAgents))
	for _, name := range []string{"runtime", "config", "agent"} {
		_ = wl.MarkFlagRequired(name)
	}
	runCmd.AddCommand(wl)
	return runCmd
}

func newApply(a *app) *cobra.Command {
	apply := &cobra.Command{
		Use:   "apply FILE...|-",
		Short: "Apply (or with -d delete) the workloads and configs of manifests and wait for the workloads",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var agent *string
			if cmd.Flags().Changed("agent") {
				agent = &a.applyAgent
			}
			return a.withPlan(cmd, func(s *cli.Session) error {
				return s.Apply(cmd.Context(), args, agent, a.applyDelete)
			})
		},
	}
	apply.Flags().StringVar(&a.applyAgent, "agent", "", "agent for every workload, overriding the manifests")
	_ = apply.RegisterFlagCompletionFunc("agent", a.completeFlagName(connectedAgents))
	apply.Flags().BoolVarP(&a.applyDelete, "delete", "d", false, "delete what the manifests name instead")
	planFlags(a, apply)
	return apply
}

func newLogs(a *app) *cobra.Command {
	logs := &cobra.Command{
		Use:               "logs NAME...",
		Short:             "Print the logs of workloads",
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: a.completeNames(desiredWorkloads),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.logs.Workloads = args
			a.warnServerLike("logs", "since", a.logs.Since)
			return a.with(cmd.Context(), func(s *cli.Session) error { return s.Logs(cmd.Context(), a.logs) })
		},
	}
	f := logs.Flags()
	f.BoolVarP(&a.logs.Follow, "follow", "f", false, "keep printing new lines until Ctrl-C")
	f.IntVarP(&a.logs.Tail, "tail", "t", -1, "only the last N lines per workload (-1: all)")
	f.StringVarP(&a.logs.Since, "since", "s", "", "only lines after this time (RFC 3339)")
	f.StringVarP(&a.logs.Until, "until", "u", "", "only lines before this time (RFC 3339)")
	f.BoolVarP(&a.logs.Names, "names", "n", false, "prefix every line with its workload name")
	shadowServerURL(a, logs)
	return logs
}

// completeOutputs makes the -o of every command complete the formats its
// usage lists ("output format: table, json or yaml"), so that a command
// added later completes its own without being told.
func completeOutputs(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		completeOutputs(c)
	}
	f := cmd.Flags().Lookup("output")
	if f == nil {
		return
	}
	if _, ok := cmd.GetFlagCompletionFunc("output"); ok {
		return
	}
	if formats := outputFormats(f.Usage); len(formats) > 0 {
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(formats, cobra.ShellCompDirectiveNoFileComp))
	}
}

// outputFormats reads the formats from the usage of an -o flag: the words
// after the colon, separated by commas and "or", without remarks in
// parentheses.
func outputFormats(usage string) []string {
	_, list, ok := strings.Cut(usage, ":")
	if !ok {
		return nil
	}
	for {
		i := strings.IndexByte(list, '(')
		j := strings.IndexByte(list, ')')
		if i < 0 || j < i {
			break
		}
		list = list[:i] + list[j+1:]
	}
	var out []string
	for _, w := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' }) {
		if w != "or" {
			out = append(out, w)
		}
	}
	return out
}

// warnServerLike warns when the value of a local -s (--state after get
// workloads, --since after logs) looks like a server address: in ank and
// here, the server's -s goes before the subcommand; after it, -s is the
// command's own flag, and the command would talk to the default server.
func (a *app) warnServerLike(cmd, flag, value string) {
	if !cli.LooksLikeServerAddress(value) {
		return
	}
	fmt.Fprintf(a.stderr, "warning: after %q, -s is --%s, and %q looks like a server address: give the server before the subcommand (grapnel -s %s %s ...) or as --server-url %s\n",
		cmd, flag, value, value, cmd, value)
}

// Masks whose keys shell completion offers.
const (
	desiredWorkloads = "desiredState.workloads"
	desiredConfigs   = "desiredState.configs"
	connectedAgents  = "agents"
)

// completeNames offers the workload names, config keys or agents the
// server has (the keys under mask), but not those already given.
// Completion must never hang or print errors into the shell, so failures
// just offer nothing.
func (a *app) completeNames(mask string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		keys, err := a.liveKeys(cmd, mask)
		if err != nil {
			cobra.CompDebugln(fmt.Sprintf("completion: %v", err), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) && !slices.Contains(args, k) {
				out = append(out, k)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeName is completeNames for a command that takes one name: it
// offers nothing once it is given.
func (a *app) completeName(mask string) cobra.CompletionFunc {
	names := a.completeNames(mask)
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names(cmd, args, prefix)
	}
}

// completeFlagName is completeNames for a flag's value: the command's
// arguments are other names.
func (a *app) completeFlagName(mask string) cobra.CompletionFunc {
	names := a.completeNames(mask)
	return func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		return names(cmd, nil, prefix)
	}
}

// liveKeys asks the server for the part of the state at the mask path
// and returns its keys, sorted; none when it is no map there.
func (a *app) liveKeys(cmd *cobra.Command, path string) ([]string, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	var keys []string
	err := a.with(ctx, func(s *cli.Session) error {
		cs, err := s.CompleteState(ctx, []string{path})
		if err != nil {
			return err
		}
		var n any = map[string]any(cs)
		for _, part := range strings.Split(path, ".") {
			m, _ := n.(map[string]any)
			n = m[part]
		}
		m, _ := n.(map[string]any)
		keys = state.SortedKeys(m)
		return nil
	})
	return keys, err
}
