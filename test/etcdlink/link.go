// Package etcdlink is a TCP link between one kube-apiserver and etcd whose etcd-to-apiserver
// direction a test can hold. While it is held, that apiserver receives nothing from etcd: its watch
// cache stays behind every write made through another apiserver, deterministically, and any read it
// sends to etcd waits. Requests still flow towards etcd, so writes through it are applied; only
// their answers wait. Used by the two-apiserver tier (test/ha) and benchmarks.
package etcdlink

import (
	"io"
	"net"
	"net/url"
	"sync"
)

// Link forwards connections from the apiserver to etcd.
type Link struct {
	ln       net.Listener
	upstream string

	mu     sync.Mutex
	open   *sync.Cond
	held   bool
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// Start listens on a loopback port and forwards every connection to upstream (etcd's host:port).
func Start(upstream string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, upstream: upstream, conns: map[net.Conn]struct{}{}}
	l.open = sync.NewCond(&l.mu)
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

// URL is the address to give the apiserver as --etcd-servers.
func (l *Link) URL() *url.URL { return &url.URL{Scheme: "http", Host: l.ln.Addr().String()} }

// Hold stops delivering etcd's bytes to the apiserver. Bytes etcd sends after Hold returns are
// kept, in order, until Release; a chunk read before Hold may still be delivered.
func (l *Link) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = true
}

// Release delivers what was kept and lets bytes through again.
func (l *Link) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held = false
	l.open.Broadcast()
}

// Close stops listening, closes every connection and waits for the forwarding to end.
func (l *Link) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.open.Broadcast()
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Link) accept() {
	defer l.wg.Done()
	for {
		down, err := l.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", l.upstream)
		if err != nil {
			_ = down.Close()
			continue
		}
		if !l.track(down, up) {
			return
		}
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			_, _ = io.Copy(up, down)
			l.closePair(down, up)
		}()
		go func() {
			defer l.wg.Done()
			l.deliver(down, up)
			l.closePair(down, up)
		}()
	}
}

// deliver copies etcd's bytes to the apiserver, waiting while the link is held.
func (l *Link) deliver(down, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			if !l.waitOpen() {
				return
			}
			if _, werr := down.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitOpen blocks while the link is held; false once it is closed.
func (l *Link) waitOpen() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.held && !l.closed {
		l.open.Wait()
	}
	return !l.closed
}

func (l *Link) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		l.conns[c] = struct{}{}
	}
	return true
}

func (l *Link) closePair(conns ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(l.conns, c)
	}
}
