package controlif

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"

	"github.com/grapnel-io/grapnel/internal/testwait"
	"github.com/grapnel-io/grapnel/rpc/ankbase"
	"github.com/grapnel-io/grapnel/rpc/controlapi"
	"github.com/grapnel-io/grapnel/state"
)

// wait bounds every wait of these tests; passing runs take milliseconds.
const wait = 5 * time.Second

var testInst = state.InstanceName{WorkloadName: "dyn", AgentName: "agent_A", ID: "0123abcd"}

// readAccess lets a workload read desiredState.workloads and the logs of
// every workload but "secret".
var readAccess = state.ControlInterfaceAccess{
	AllowRules: []state.AccessRule{stateRuleOf(state.RWRead, "desiredState.workloads"), logRuleOf("*")},
	DenyRules:  []state.AccessRule{logRuleOf("secret")},
}

// forwarder records what the agent forwards; fail makes it refuse.
type forwarder struct {
	ch   chan *ankbase.Request
	mu   sync.Mutex
	fail error
}

func newForwarder() *forwarder { return &forwarder{ch: make(chan *ankbase.Request, 100)} }

func (f *forwarder) forward(r *ankbase.Request) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	f.ch <- r
	return nil
}

func (f *forwarder) setFail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = err
}

func (f *forwarder) next(t *testing.T) *ankbase.Request {
	t.Helper()
	select {
	case r := <-f.ch:
		return r
	case <-time.After(wait):
		t.Fatal("nothing forwarded")
		return nil
	}
}

func (f *forwarder) none(t *testing.T) {
	t.Helper()
	select {
	case r := <-f.ch:
		t.Fatalf("unexpected forward %v", r)
	default:
	}
}

// workload is the workload's side of a control interface, opened as a
// workload opens it: `output` for writing, `input` for reading.
type workload struct {
	t      *testing.T
	dir    string
	out    *os.File
	inCh   chan *os.File
	in     *os.File
	reader *bufio.Reader
}

// connect opens `output` (the agent reads it already) and `input`, both
// without waiting.
func connect(t *testing.T, dir string) *workload {
	t.Helper()
	w := &workload{t: t, dir: dir}
	w.openOutput()
	in, err := os.OpenFile(filepath.Join(dir, inputName), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open input: %v", err)
	}
	w.in, w.reader = in, bufio.NewReader(in)
	t.Cleanup(w.close)
	return w
}

// connectBlocking opens the FIFOs as most workloads do: `output` at once,
// `input` with a plain open that waits for the agent's first write.
func connectBlocking(t *testing.T, dir string) *workload {
	t.Helper()
	w := &workload{t: t, dir: dir, inCh: make(chan *os.File, 1)}
	w.openOutput()
	go func() {
		f, err := os.OpenFile(filepath.Join(dir, inputName), os.O_RDONLY, 0)
		if err != nil {
			t.Errorf("open input: %v", err)
			close(w.inCh)
			return
		}
		w.inCh <- f
	}()
	t.Cleanup(w.close)
	return w
}

func (w *workload) openOutput() {
	f, err := os.OpenFile(filepath.Join(w.dir, outputName), os.O_WRONLY, 0)
	if err != nil {
		w.t.Fatalf("open output: %v", err)
	}
	w.out = f
}

func (w *workload) send(m proto.Message) {
	w.t.Helper()
	if _, err := protodelim.MarshalTo(w.out, m); err != nil {
		w.t.Fatalf("write output: %v", err)
	}
}

func (w *workload) sendRaw(b []byte) {
	w.t.Helper()
	if _, err := w.out.Write(b); err != nil {
		w.t.Fatalf("write output: %v", err)
	}
}

// reconnect closes `output` and opens it again: a new connection.
func (w *workload) reconnect() {
	w.t.Helper()
	_ = w.out.Close()
	w.openOutput()
}

func (w *workload) input() *os.File {
	w.t.Helper()
	if w.in == nil {
		select {
		case f, ok := <-w.inCh:
			if !ok {
				w.t.Fatal("input not opened")
			}
			w.in = f
			w.reader = bufio.NewReader(f)
		case <-time.After(wait):
			w.t.Fatal("the agent never opened input")
		}
	}
	return w.in
}

func (w *workload) recv() *controlapi.FromAnkaios {
	w.t.Helper()
	in := w.input()
	deadline := time.Now().Add(wait)
	_ = in.SetReadDeadline(deadline)
	var m *controlapi.FromAnkaios
	testwait.For(w.t, wait, func() bool {
		m = &controlapi.FromAnkaios{}
		err := protodelim.UnmarshalFrom(w.reader, m)
		// EOF: the agent's writer went away (a new session, an agent
		// restart); a workload keeps reading until the next one comes.
		if err != nil && !errors.Is(err, io.EOF) {
			w.t.Fatalf("read input: %v", err)
		}
		return err == nil
	}, "a message on the input")
	return m
}

// closeInput closes the workload's reading end.
func (w *workload) closeInput() {
	_ = w.input().Close()
}

// close releases the workload's ends; an open of `input` still waiting
// for the agent is released by opening `input` for writing once.
func (w *workload) close() {
	if w.out != nil {
		_ = w.out.Close()
	}
	if w.in == nil {
		if fd, err := unix.Open(filepath.Join(w.dir, inputName), unix.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
			if f, ok := <-w.inCh; ok {
				w.in = f
			}
			_ = unix.Close(fd)
		}
	}
	if w.in != nil {
		_ = w.in.Close()
	}
}

func (w *workload) handshake() {
	w.t.Helper()
	w.send(helloMsg("1.0.0"))
	if m := w.recv(); m.GetControlInterfaceAccepted() == nil {
		w.t.Fatalf("handshake answered %v", m)
	}
}

func isFIFO(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("%s is %v, not a FIFO", path, fi.Mode())
	}
	return fi
}

func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatalf("%s did not return", what)
	}
}

var errOffline = errors.New("offline")

// quiet keeps the agent's logs out of the test output.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func stateRuleOf(op state.ReadWrite, masks ...string) state.AccessRule {
	return state.AccessRule{Operation: op, FilterMasks: masks}
}

func logRuleOf(names ...string) state.AccessRule {
	return state.AccessRule{IsLogRule: true, WorkloadNames: names}
}

func readReq(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestId: "r", RequestContent: &ankbase.Request_CompleteStateRequest{
		CompleteStateRequest: &ankbase.CompleteStateRequest{FieldMask: masks}}}
}

func logsReq(names ...string) *ankbase.Request {
	var wl []*ankbase.WorkloadInstanceName
	for _, n := range names {
		wl = append(wl, &ankbase.WorkloadInstanceName{WorkloadName: n, AgentName: "agent_A", Id: "1234"})
	}
	return &ankbase.Request{RequestId: "l", RequestContent: &ankbase.Request_LogsRequest{
		LogsRequest: &ankbase.LogsRequest{WorkloadNames: wl}}}
}

func writeReq(masks ...string) *ankbase.Request {
	return &ankbase.Request{RequestId: "w", RequestContent: &ankbase.Request_UpdateStateRequest{
		UpdateStateRequest: &ankbase.UpdateStateRequest{UpdateMask: masks}}}
}
