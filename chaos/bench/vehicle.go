package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grapnel-io/grapnel/rpc"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/grpcapi"
	"github.com/grapnel-io/grapnel/state"
)

// ProcessWorkload is a process workload that sleeps for arg seconds on
// agent.
func ProcessWorkload(agent, arg string) *state.Workload {
	return &state.Workload{Agent: agent, Runtime: "process", RestartPolicy: state.RestartNever,
		RuntimeConfig: "command: /bin/sleep\nargs: [\"" + arg + "\"]\n"}
}

// AllRunning is a WaitStates condition: every workload of manifest runs.
func AllRunning(manifest map[string]*state.Workload) func([]state.WorkloadState) bool {
	return func(ws []state.WorkloadState) bool {
		for name := range manifest {
			s, ok := StateOf(ws, name)
			if !ok || s.State.State != state.StateRunning {
				return false
			}
		}
		return true
	}
}

// Usage is what a process has cost so far: bytes it caused to be written
// to storage (/proc/PID/io write_bytes), CPU time in clock ticks
// (/proc/PID/stat utime+stime) and its resident set.
type Usage struct {
	WriteBytes int64
	CPUTicks   int64
	RSS        int64
}

// clockTicks is USER_HZ, the unit of utime and stime: 100 on every Linux
// architecture Grapnel runs on.
const clockTicks = 100

// WrittenBytes sums what the processes have caused to be written to
// storage; a process that cannot be read counts nothing.
func WrittenBytes(pids []int) int64 {
	var n int64
	for _, pid := range pids {
		if u, err := ReadUsage(pid); err == nil {
			n += u.WriteBytes
		}
	}
	return n
}

// ReadUsage reads a process's usage from /proc.
func ReadUsage(pid int) (Usage, error) {
	var u Usage
	io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(io), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes: "); ok {
			u.WriteBytes, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	if u.CPUTicks, err = statTicks(fmt.Sprintf("/proc/%d/stat", pid)); err != nil {
		return u, err
	}
	u.RSS, err = RSS(pid)
	return u, err
}

// statFields reads a /proc stat file and returns its fields from the
// third (the state) on: the command name before them is in parentheses
// and may hold spaces and parentheses, so they are counted from the last
// ')'. It fails unless at least n fields follow the name.
func statFields(path string, n int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("%s: no command name", path)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < n {
		return nil, fmt.Errorf("%s: %d fields", path, len(f))
	}
	return f, nil
}

// Footprint is one process's cost over a window of steady state.
type Footprint struct {
	Name        string
	BytesPerHr  float64 // bytes written, scaled to an hour
	CPUPercent  float64 // of one core
	RSS         int64   // at the end of the window
	WindowTicks int64
}

// MeasureIdle samples the named processes at the start and the end of
// window and returns what each cost in between.
func MeasureIdle(ctx context.Context, pids map[string]int, window time.Duration) ([]Footprint, error) {
	start := map[string]Usage{}
	for n, pid := range pids {
		u, err := ReadUsage(pid)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		start[n] = u
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(window):
	}
	elapsed := time.Since(t0)
	var out []Footprint
	for _, n := range sortedNames(pids) {
		u, err := ReadUsage(pids[n])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		d := u.CPUTicks - start[n].CPUTicks
		out = append(out, Footprint{
			Name:       n,
			BytesPerHr: float64(u.WriteBytes-start[n].WriteBytes) * float64(time.Hour) / float64(elapsed),
			CPUPercent: 100 * float64(d) / clockTicks / elapsed.Seconds(),
			RSS:        u.RSS, WindowTicks: d,
		})
	}
	return out, nil
}

// Children lists the processes whose parent is pid (/proc/*/stat).
func Children(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// Field 4, the parent's pid; a process that ended meanwhile is
		// skipped.
		if f, err := statFields("/proc/"+e.Name()+"/stat", 2); err == nil && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out, nil
}

func sortedNames(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// ErrNoAnswer is a replica that did not answer within the bound.
var ErrNoAnswer = errors.New("no answer")

// FirstAnswer returns the time from start until addr answers a complete
// state request on the commander stream, retrying the connection every
// few milliseconds, as a client that waits for the server at power-on
// does.
func FirstAnswer(ctx context.Context, addr string, start time.Time) (time.Duration, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: time.Millisecond, Multiplier: 1.2, MaxDelay: 2 * time.Millisecond},
			MinConnectTimeout: 100 * time.Millisecond,
		}))
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	for {
		if d, err := askOnce(ctx, cc, start); err == nil {
			return d, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%w from %s: %v", ErrNoAnswer, addr, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func askOnce(ctx context.Context, cc *grpc.ClientConn, start time.Time) (time.Duration, error) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	st, err := grpcapi.NewCommandConnectionClient(cc).ConnectCommand(sctx, grpc.WaitForReady(true))
	if err != nil {
		return 0, err
	}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_CommanderHello{CommanderHello: &grpcapi.CommanderHello{ProtocolVersion: rpc.ProtocolVersion}}}); err != nil {
		return 0, err
	}
	req := &ankbase.Request{RequestId: "first", RequestContent: &ankbase.Request_CompleteStateRequest{CompleteStateRequest: &ankbase.CompleteStateRequest{}}}
	if err := st.Send(&grpcapi.ToServer{ToServerEnum: &grpcapi.ToServer_Request{Request: req}}); err != nil {
		return 0, err
	}
	for {
		m, err := st.Recv()
		if err != nil {
			return 0, err
		}
		if r := m.GetResponse(); r.GetRequestId() == "first" {
			if r.GetCompleteStateResponse() == nil {
				return 0, fmt.Errorf("answered %v", r)
			}
			return time.Since(start), nil
		}
	}
}
