package netns

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// helperEnv makes the test binary act as a tiny network tool when the
// tests start it inside a namespace through Command.
const helperEnv = "GRAPNEL_NETNS_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		os.Exit(helperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperMain runs one helper mode:
//
//	serve IP PORT      TCP echo and UDP receiver on IP:PORT; prints "ready",
//	                   then "udp FROM MSG" per datagram; exits after 60 s
//	tcp IP:PORT MS     connect, send a line, read the echo, print the round
//	                   trip in microseconds; exit 1 on failure or timeout
//	udp IP:PORT MSG    send one datagram
//	signal PREFIX SUBNET  Setup one host, CloseOnSignal, print "ready", wait
func helperMain(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "helper: no mode")
		return 2
	}
	var err error
	switch args[0] {
	case "serve":
		err = helperServe(args[1], args[2])
	case "tcp":
		err = helperTCP(args[1], args[2])
	case "udp":
		err = helperUDP(args[1], args[2])
	case "signal":
		err = helperSignal(args[1], args[2])
	default:
		err = fmt.Errorf("unknown mode %q", args[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

func helperServe(ip, port string) error {
	addr := net.JoinHostPort(ip, port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	out := make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	go func() {
		buf := make([]byte, 1500)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(from.String())
			out <- fmt.Sprintf("udp %s %s", host, buf[:k])
		}
	}()
	fmt.Println("ready")
	deadline := time.After(60 * time.Second)
	for {
		select {
		case line := <-out:
			fmt.Println(line)
		case <-deadline:
			return nil
		}
	}
}

func helperTCP(addr, ms string) error {
	d, err := time.ParseDuration(ms + "ms")
	if err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(d))
	start := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return fmt.Errorf("echo %q", line)
	}
	fmt.Println(time.Since(start).Microseconds())
	return nil
}

func helperUDP(addr, msg string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Write([]byte(msg))
	return err
}

func helperSignal(prefix, subnet string) error {
	n, err := Setup(Config{Prefix: prefix, Hosts: 1, Subnet: subnet})
	if err != nil {
		return err
	}
	n.CloseOnSignal()
	fmt.Println("ready")
	time.Sleep(30 * time.Second)
	return fmt.Errorf("no signal within 30 s")
}

// server is a helper "serve" process running in a host.
type server struct {
	lines chan string
}

// startServer runs the echo/UDP helper in h on port and waits for it.
func startServer(t *testing.T, n *Net, h *Host, port int) *server {
	t.Helper()
	cmd := helperCmd(t, n, h, "serve", h.Addr, fmt.Sprint(port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &server{lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	select {
	case l := <-s.lines:
		if l != "ready" {
			t.Fatalf("server in %s: %q", h.Name, l)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("server in %s not ready in 5 s", h.Name)
	}
	return s
}

// udpFrom waits up to d for a datagram from ip and reports whether it came.
func (s *server) udpFrom(ip, msg string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return false
			}
			if l == "udp "+ip+" "+msg {
				return true
			}
		case <-deadline:
			return false
		}
	}
}

func helperCmd(t *testing.T, n *Net, h *Host, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command(h, exe, args...)
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	return cmd
}

// probeTCP connects from h to ip:port within timeout; it returns the echo
// round trip or an error.
func probeTCP(t *testing.T, n *Net, h *Host, ip string, port int, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	cmd := helperCmd(t, n, h, "tcp", net.JoinHostPort(ip, fmt.Sprint(port)), fmt.Sprint(timeout.Milliseconds()))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s -> %s:%d: %v: %s", h.Name, ip, port, err, strings.TrimSpace(string(out)))
	}
	var us int64
	if _, err := fmt.Sscan(string(out), &us); err != nil {
		return 0, fmt.Errorf("probe output %q: %v", out, err)
	}
	return time.Duration(us) * time.Microsecond, nil
}

// sendUDP sends one datagram from h to ip:port.
func sendUDP(t *testing.T, n *Net, h *Host, ip string, port int, msg string) {
	t.Helper()
	cmd := helperCmd(t, n, h, "udp", net.JoinHostPort(ip, fmt.Sprint(port)), msg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("udp from %s: %v: %s", h.Name, err, out)
	}
}

func execCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }
