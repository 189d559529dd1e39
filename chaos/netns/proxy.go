package netns

import (
	"net"
	"sync"
	"time"
)

// Bounds for the delay proxy.
const (
	proxyDialTimeout = 3 * time.Second
	chunkSize        = 32 << 10
	chunkQueue       = 256
)

// proxy is a TCP relay that holds every chunk for a fixed delay before
// passing it on, in both directions, keeping the order.
type proxy struct {
	ln     net.Listener
	target string
	delay  time.Duration

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

func startProxy(listenIP, target string, d time.Duration) (*proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(listenIP, "0"))
	if err != nil {
		return nil, err
	}
	p := &proxy{ln: ln, target: target, delay: d, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			return
		}
		p.wg.Add(1)
		go p.handle(c)
	}
}

// track registers a connection so stop can cut it; false once stopped.
func (p *proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *proxy) handle(down net.Conn) {
	defer p.wg.Done()
	defer down.Close()
	up, err := net.DialTimeout("tcp", p.target, proxyDialTimeout)
	if err != nil {
		return
	}
	defer up.Close()
	if !p.track(up) {
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(up, down) }()
	go func() { defer wg.Done(); p.pump(down, up) }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, up)
	delete(p.conns, down)
	p.mu.Unlock()
}

type chunk struct {
	due  time.Time
	data []byte
}

// pump copies src to dst, each chunk released delay after it was read.
// On EOF it half-closes dst; on a write error it closes both.
func (p *proxy) pump(dst, src net.Conn) {
	queue := make(chan chunk, chunkQueue)
	quit := make(chan struct{})
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, chunkSize)
			k, err := src.Read(buf)
			if k > 0 {
				select {
				case queue <- chunk{time.Now().Add(p.delay), buf[:k]}:
				case <-quit:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			time.Sleep(wait)
		}
		if _, err := dst.Write(c.data); err != nil {
			close(quit)
			dst.Close()
			src.Close()
			for range queue {
			}
			return
		}
	}
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
}

// stop closes the listener and every connection and waits for the
// goroutines, at most a few seconds.
func (p *proxy) stop() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() { p.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
}
