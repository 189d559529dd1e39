package bench

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Main is the main function of a bench command: it parses the arguments
// and runs with a context that SIGINT and SIGTERM cancel. It exits 2 on a
// usage error and 1 when the run fails, naming the command.
func Main[O any](name string, parse func([]string) (O, error), run func(context.Context, O, io.Writer) error) {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		stop()
		os.Exit(1)
	}
}

// Logf writes a progress line with the time to stderr; the report goes to
// stdout.
func Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// WorkDir is dir, or a new temporary directory named after prefix when dir
// is empty. Its cleanup removes it unless the run failed or keep is set,
// and then says where it was kept.
func WorkDir(dir, prefix string, keep bool) (string, func(failed bool), error) {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return "", nil, err
		}
	}
	return dir, func(failed bool) {
		if failed || keep {
			Logf("data dirs and logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	}, nil
}
