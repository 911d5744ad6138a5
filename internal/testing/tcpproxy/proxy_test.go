package tcpproxy

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every length-prefixed message with itself.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func newProxy(t *testing.T) *Proxy {
	t.Helper()
	p, err := New(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func frame(s string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(s)))
	return append(b, s...)
}

// roundTrip sends msg and reads len(msg) bytes back within d.
func roundTrip(c net.Conn, msg []byte, d time.Duration) ([]byte, error) {
	c.SetDeadline(time.Now().Add(d))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return nil, err
	}
	got := make([]byte, len(msg))
	_, err := io.ReadFull(bufio.NewReader(c), got)
	return got, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestForward(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	got, err := roundTrip(c, frame("hello"), 5*time.Second)
	if err != nil || string(got) != string(frame("hello")) {
		t.Fatalf("roundTrip = %q, %v; want %q", got, err, frame("hello"))
	}
}

func TestCut(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	if _, err := roundTrip(c, []byte("x"), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if _, err := roundTrip(c, []byte("y"), 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("roundTrip after Cut: err = %v; want a closed connection", err)
	}
	c2 := dial(t, p)
	if _, err := roundTrip(c2, []byte("z"), 5*time.Second); err != nil {
		t.Fatalf("roundTrip on a new connection after Cut: %v", err)
	}
}

func TestRefuseRestore(t *testing.T) {
	p := newProxy(t)
	p.Refuse()
	c := dial(t, p)
	if _, err := roundTrip(c, []byte("x"), 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("roundTrip while refusing: err = %v; want a closed connection", err)
	}
	p.Restore()
	c2 := dial(t, p)
	if _, err := roundTrip(c2, []byte("y"), 5*time.Second); err != nil {
		t.Fatalf("roundTrip after Restore: %v", err)
	}
}

func TestFreezeRestore(t *testing.T) {
	p := newProxy(t)
	c := dial(t, p)
	p.Freeze()
	if _, err := roundTrip(c, []byte("x"), 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("roundTrip while frozen: err = %v; want a timeout", err)
	}
	p.Restore()
	// The byte held while frozen is relayed now.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil || b[0] != 'x' {
		t.Fatalf("read after Restore = %q, %v; want \"x\"", b, err)
	}
}

func TestForwardThenCut(t *testing.T) {
	p := newProxy(t)
	seen := make(chan Message, 10)
	p.SetHook(LengthPrefixed, func(m Message) Action {
		if m.Dir == Downstream {
			return Forward
		}
		seen <- Message{Conn: m.Conn, Dir: m.Dir, Index: m.Index, Data: append([]byte(nil), m.Data...)}
		if string(m.Data[4:]) == "cut" {
			return ForwardThenCut
		}
		return Forward
	})
	c := dial(t, p)
	// Two messages in one write are split by the framer.
	if _, err := roundTrip(c, append(frame("a"), frame("bc")...), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := roundTrip(c, frame("cut"), 5*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("roundTrip of the cut message: err = %v; want a closed connection", err)
	}
	want := []struct {
		dir   Direction
		index int
		data  string
	}{{Upstream, 0, "a"}, {Upstream, 1, "bc"}}
	for _, w := range want {
		var m Message
		select {
		case m = <-seen:
		case <-time.After(5 * time.Second):
			t.Fatal("hook not called")
		}
		if m.Dir != w.dir || m.Index != w.index || string(m.Data[4:]) != w.data {
			t.Errorf("hook saw %v #%d %q; want %v #%d %q", m.Dir, m.Index, m.Data[4:], w.dir, w.index, w.data)
		}
	}
}

func TestLengthPrefixed(t *testing.T) {
	tests := []struct {
		in   []byte
		want int
	}{
		{nil, 0},
		{[]byte{0, 0, 0}, 0},
		{[]byte{0, 0, 0, 2, 'a'}, 0},
		{[]byte{0, 0, 0, 2, 'a', 'b', 'c'}, 6},
		{[]byte{0xff, 0, 0, 0}, -1},
	}
	for _, tt := range tests {
		if got := LengthPrefixed(tt.in); got != tt.want {
			t.Errorf("LengthPrefixed(%v) = %d; want %d", tt.in, got, tt.want)
		}
	}
}
