package etcdlink

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// A held link keeps the upstream's answers, in order, and delivers them on Release; requests
// still reach the upstream meanwhile.
func TestHoldKeepsAnswersUntilRelease(t *testing.T) {
	l, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	}()
	c, err := net.Dial("tcp", l.URL().Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	send := func(s string) {
		if _, err := c.Write([]byte(s + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	read := func() string {
		_ = c.SetReadDeadline(time.Now().Add(time.Minute))
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return line[:len(line)-1]
	}
	send("before")
	if got := read(); got != "before" {
		t.Fatalf("got %q", got)
	}
	l.Hold()
	send("one")
	send("two")
	// Nothing may arrive while held (a short read deadline: this can only pass wrongly, never
	// fail because the machine is slow).
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if line, err := r.ReadString('\n'); err == nil || line != "" {
		t.Fatalf("read %q while the link was held", line)
	}
	l.Release()
	if got := read() + read(); got != "onetwo" {
		t.Fatalf("after Release got %q, want the kept answers in order", got)
	}
}

// Close ends held connections instead of leaving their goroutines blocked.
func TestCloseEndsHeldLink(t *testing.T) {
	l, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", l.URL().Host)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l.Hold()
	if _, err := c.Write([]byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := bufio.NewReader(c).ReadString('\n'); err == nil {
		t.Fatal("read an answer through a closed link")
	}
}
