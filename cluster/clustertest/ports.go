package clustertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports come from below the kernel's ephemeral range, so an outgoing
// connection (whose source port the kernel picks from that range) never
// takes a port a stopped replica will bind again on restart; and a port is
// handed out once per process.
var (
	portsMu sync.Mutex
	used    = map[int]bool{}
)

// portRange is [lo, hi) below the ephemeral range, or (0, 0) when it cannot
// be read.
func portRange() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil || low < 12000 {
		return 0, 0
	}
	return 10000, low
}

// freePort returns a loopback address free for TCP and, if udp, for UDP on
// the same port (memberlist binds both).
func freePort(udp bool) (string, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	lo, hi := portRange()
	for range 200 {
		port := 0
		if hi > lo {
			port = lo + rand.IntN(hi-lo)
			if used[port] {
				continue
			}
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		addr := ln.Addr().String()
		port = ln.Addr().(*net.TCPAddr).Port
		ok := true
		if udp {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				ok = false
			} else {
				pc.Close()
			}
		}
		ln.Close()
		if ok && !used[port] {
			used[port] = true
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free loopback port")
}

func freeTCP() (string, error)    { return freePort(false) }
func freeTCPUDP() (string, error) { return freePort(true) }

// FreeAddr is a loopback address free for TCP and UDP, below the
// ephemeral range and not handed out before in this process. Tests that
// bind an address later (Raft, gossip) use it: a port from the ephemeral
// range can be taken meanwhile as the source port of some connection.
func FreeAddr() (string, error) { return freePort(true) }
