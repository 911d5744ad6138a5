package zkstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/testing/tcpproxy"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/zkstore"
)

// peer is a TCP listener on loopback that does something wrong with every
// connection it accepts: serve runs on each, and the connection is closed
// when serve returns or the test ends.
func peer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
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
				serve(c)
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

// TestOpenRefusedSaysWhy: a server that refuses the connection is named in
// Open's error, with the refusal.
func TestOpenRefusedSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	st, err := zkstore.Open(ctx, []string{addr})
	if err == nil {
		st.Close()
		t.Fatal("Open succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Open = %v; want DeadlineExceeded, naming %s and the refusal", err, addr)
	}
}

// TestOpenBoundedByCtx opens sessions against peers that are not working
// ZooKeeper servers: Open must return ctx's error about when ctx ends,
// having shut the client down (goleak checks that nothing is left).
func TestOpenBoundedByCtx(t *testing.T) {
	const wait = time.Second
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
	}{
		{"silent", func(c net.Conn) {
			// Accept, read, never answer.
			var b [512]byte
			for {
				if _, err := c.Read(b[:]); err != nil {
					return
				}
			}
		}},
		{"hangs up", func(c net.Conn) { c.Close() }},
		{"other service", func(c net.Conn) {
			var b [512]byte
			c.Read(b[:])
			c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
			for {
				if _, err := c.Read(b[:]); err != nil {
					return
				}
			}
		}},
		{"stalls mid-answer", func(c net.Conn) {
			// The length of a connect response, then nothing: the
			// client sets no deadline on the rest.
			var b [512]byte
			c.Read(b[:])
			c.Write(binary.BigEndian.AppendUint32(nil, 37))
			for {
				if _, err := c.Read(b[:]); err != nil {
					return
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := peer(t, tc.serve)
			ctx, cancel := context.WithTimeout(t.Context(), wait)
			defer cancel()
			start := time.Now()
			st, err := zkstore.Open(ctx, []string{addr})
			took := time.Since(start)
			if err == nil {
				st.Close()
				t.Fatalf("Open(%s) succeeded", tc.name)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Open = %v; want DeadlineExceeded", err)
			}
			// The error says what was tried.
			if !strings.Contains(err.Error(), addr) {
				t.Errorf("Open = %v; want it to name %s", err, addr)
			}
			t.Logf("Open with a %v ctx returned after %v: %v", wait, took, err)
			if took > wait+wait/2 {
				t.Errorf("Open with a %v ctx returned after %v; want about %v", wait, took, wait)
			}
		})
	}
}

// TestClosePrompt closes sessions whose server cannot be reached: with
// the connection frozen, Close waits at most about a second for the server
// to answer its close request; with the connection refused, it returns at
// once.
func TestClosePrompt(t *testing.T) {
	_, b := server(t)
	for _, tc := range []struct {
		name  string
		fault func(*tcpproxy.Proxy)
		bound time.Duration
	}{
		{"frozen", (*tcpproxy.Proxy).Freeze, 1500 * time.Millisecond},
		{"refused", (*tcpproxy.Proxy).Refuse, 500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, proxies := b.OpenWithProxies(t)
			disc := st.Disconnected()
			tc.fault(proxies[0])
			if tc.name == "refused" {
				select {
				case <-disc:
				case <-t.Context().Done():
					t.Fatal("client never noticed the refusal")
				}
			}
			start := time.Now()
			st.Close()
			took := time.Since(start)
			t.Logf("Close took %v", took)
			if took > tc.bound {
				t.Errorf("Close on a %s connection took %v; want at most %v", tc.name, took, tc.bound)
			}
			if cause := context.Cause(st.Context()); !errors.Is(cause, store.ErrClosed) {
				t.Errorf("Cause = %v; want ErrClosed", cause)
			}
			proxies[0].Restore()
		})
	}
}

// replyDropper is a proxy hook that drops every answer of the server (the
// connect response aside) while drop is set, and cuts the connection
// instead of forwarding the next delete request when cutDelete is set.
type replyDropper struct {
	drop, cutDelete atomic.Bool
	cut             chan struct{} // closed when a delete was cut off
}

func (r *replyDropper) hook(m tcpproxy.Message) tcpproxy.Action {
	if m.Index == 0 {
		return tcpproxy.Forward
	}
	if m.Dir == tcpproxy.Downstream && r.drop.Load() {
		return tcpproxy.Drop
	}
	if m.Dir == tcpproxy.Upstream {
		if _, op, ok := zkserver.RequestHeader(m.Data); ok && op == 2 && r.cutDelete.CompareAndSwap(true, false) {
			close(r.cut)
			return tcpproxy.Cut
		}
	}
	return tcpproxy.Forward
}

// TestCancelledCreateInOutage cancels creates whose answers are lost in an
// outage. Each call returns within its ctx and UndoWait; the node, which
// the server did make, is deleted once the link heals, while the session
// lives on.
func TestCancelledCreateInOutage(t *testing.T) {
	srv, b := server(t)
	other := b.Open(t)
	ctx, dir := ctxFor(t), dirFor(t)
	r := replyDropper{cut: make(chan struct{})}
	p, err := tcpproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetHook(tcpproxy.LengthPrefixed, r.hook)
	st, err := zkstore.Open(ctx, []string{p.Addr()}, zkstore.WithSessionTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const wait = 200 * time.Millisecond
	for _, mode := range []store.Mode{store.EphemeralSequential, store.Ephemeral} {
		d := dir + "/" + strings.ReplaceAll(mode.String(), "-", "")
		must[store.Node](t)(st.Create(ctx, d, nil, store.Persistent))
		r.drop.Store(true)
		cctx, cancel := context.WithTimeout(ctx, wait)
		start := time.Now()
		_, err := st.Create(cctx, d+"/n", nil, mode)
		took := time.Since(start)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Create(%v) with its answer lost = %v; want DeadlineExceeded", mode, err)
		}
		t.Logf("Create(%v) with a %v ctx, answer lost: returned after %v", mode, wait, took)
		if took > wait+zkstore.UndoWait+500*time.Millisecond {
			t.Errorf("Create(%v) returned after %v; want at most its ctx (%v) + UndoWait (%v)", mode, took, wait, zkstore.UndoWait)
		}
		// The server made the node; the outage now begins for good.
		waitChildren(t, other, d, 1)
		disc := st.Disconnected()
		p.Refuse()
		select {
		case <-disc:
		case <-ctx.Done():
			t.Fatal("client never noticed the outage")
		}
		r.drop.Store(false)
		p.Restore()
		waitChildren(t, other, d, 0)
		if err := st.Context().Err(); err != nil {
			t.Fatalf("session ended: %v", context.Cause(st.Context()))
		}
	}

	// A create whose answer arrives once its caller has left, and whose
	// undo's delete is cut off: the undo tries again after the
	// reconnection.
	d := dir + "/cut"
	must[store.Node](t)(st.Create(ctx, d, nil, store.Persistent))
	p.Freeze()
	cctx, cancel := context.WithTimeout(ctx, wait)
	_, err = st.Create(cctx, d+"/n", nil, store.Persistent)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Create(persistent) on a frozen link = %v; want DeadlineExceeded", err)
	}
	r.cutDelete.Store(true)
	p.Restore()
	// Wait for the cut: the node may not even have been made yet when
	// the link comes back, and then no children says nothing.
	select {
	case <-r.cut:
	case <-ctx.Done():
		t.Fatal("the undo never sent a delete")
	}
	waitChildren(t, other, d, 0)
	if err := st.Context().Err(); err != nil {
		t.Fatalf("session ended: %v", context.Cause(st.Context()))
	}
}

// waitChildren waits, with watches, until d has n children.
func waitChildren(t *testing.T, st store.Store, d string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cw := st.(store.ChildrenWatcher)
	for {
		kids, ev, err := cw.ChildrenW(ctx, d)
		if err != nil {
			t.Fatalf("ChildrenW(%s) = %v", d, err)
		}
		if len(kids) == n {
			return
		}
		select {
		case e := <-ev:
			if e.Err != nil {
				t.Fatalf("waiting for %d children of %s: %v", n, d, e.Err)
			}
		case <-ctx.Done():
			t.Fatalf("%s has %d children; want %d", d, len(kids), n)
		}
	}
}

// TestQuietByDefault expires a session, which makes the client complain,
// and checks that nothing reaches the standard logger; with WithLogger the
// Store's own account of it does, at Warn, and the client's misleading
// "authentication failed" only at Debug.
func TestQuietByDefault(t *testing.T) {
	_, b := server(t)
	var std lockedBuffer
	prev := log.Writer()
	log.SetOutput(&std)
	defer log.SetOutput(prev)

	var h recorder
	quiet, _ := b.OpenWithProxies(t)
	loud, _ := b.OpenWithProxies(t, zkstore.WithLogger(slog.New(&h)))
	for _, st := range []*zkstore.Store{quiet, loud} {
		b.Expire(t, st)
		select {
		case <-st.Context().Done():
		case <-t.Context().Done():
			t.Fatal("session not ended by expiry")
		}
		st.Close()
	}
	if std.String() != "" {
		t.Errorf("the standard logger got %q; want nothing", std.String())
	}
	var ended bool
	for _, r := range h.records() {
		if r.Message == "zkstore: session ended" && r.Level == slog.LevelWarn {
			ended = true
		}
		if strings.Contains(r.Message, "authentication failed") && strings.Contains(r.Message, "expired") && r.Level > slog.LevelDebug {
			t.Errorf("logged %q at %v; want Debug", r.Message, r.Level)
		}
	}
	if !ended {
		t.Errorf("no Warn record of the session's end among %d records", len(h.records()))
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// recorder is a slog.Handler that keeps every record.
type recorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recorder) WithGroup(string) slog.Handler      { return h }
func (h *recorder) records() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.recs...)
}

// TestDirectListingInOutage: a listing goes on the link as a direct request
// (see direct.go). On a frozen link it returns with its ctx, and its answer,
// arriving once the link thaws, disturbs nothing: the client never sees it
// (nothing in its log) and the next calls get their own answers. A listing
// whose connection is cut returns ErrDisconnected at once, and the session
// goes on.
func TestDirectListingInOutage(t *testing.T) {
	srv, _ := server(t)
	ctx, dir := ctxFor(t), dirFor(t)
	p, err := tcpproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var logged bytes.Buffer
	var logMu sync.Mutex
	h := slog.NewTextHandler(lockedWriter{&logMu, &logged}, &slog.HandlerOptions{Level: slog.LevelDebug})
	st, err := zkstore.Open(ctx, []string{p.Addr()}, zkstore.WithSessionTimeout(10*time.Second), zkstore.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, name := range []string{"a", "b", "c"} {
		must[store.Node](t)(st.Create(ctx, dir+"/"+name, nil, store.Persistent))
	}
	list := func(ctx context.Context) ([]store.Child, error) {
		before := zkstore.Directs(st)
		up := zkstore.DirectUp(st)
		kids, err := st.Children(ctx, dir)
		if zkstore.Directs(st) == before {
			t.Fatalf("the listing did not go as a direct request (a link for them: %v before, %v after; err %v)", up, zkstore.DirectUp(st), err)
		}
		return kids, err
	}
	if kids := must[[]store.Child](t)(list(ctx)); len(kids) != 3 {
		t.Fatalf("Children = %v; want 3 children", kids)
	}

	const wait = 200 * time.Millisecond
	p.Freeze()
	cctx, cancel := context.WithTimeout(ctx, wait)
	start := time.Now()
	_, err = list(cctx)
	took := time.Since(start)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Children on a frozen link = %v; want DeadlineExceeded", err)
	}
	if took > wait+500*time.Millisecond {
		t.Errorf("Children on a frozen link returned after %v; want about its ctx (%v)", took, wait)
	}
	p.Restore()
	must[store.Node](t)(st.Create(ctx, dir+"/d", nil, store.Persistent))
	if kids := must[[]store.Child](t)(list(ctx)); len(kids) != 4 {
		t.Fatalf("Children after the thaw = %v; want 4 children", kids)
	}

	// Drop the next direct answer, then cut the link under the listing
	// that waits for it.
	dropped := make(chan struct{})
	var drop atomic.Bool
	drop.Store(true)
	p.SetHook(tcpproxy.LengthPrefixed, func(m tcpproxy.Message) tcpproxy.Action {
		if xid, _, ok := zkserver.RequestHeader(m.Data); ok && m.Dir == tcpproxy.Downstream && xid >= 1<<29 && drop.CompareAndSwap(true, false) {
			close(dropped)
			return tcpproxy.Drop
		}
		return tcpproxy.Forward
	})
	res := make(chan error, 1)
	before := zkstore.Directs(st)
	go func() {
		_, err := st.Children(ctx, dir)
		res <- err
	}()
	select {
	case <-dropped:
	case <-ctx.Done():
		t.Fatal("no direct answer came")
	}
	p.Cut()
	if zkstore.Directs(st) == before {
		t.Fatal("the listing did not go as a direct request")
	}
	select {
	case err := <-res:
		if !errors.Is(err, store.ErrDisconnected) {
			t.Fatalf("Children on a cut link = %v; want ErrDisconnected", err)
		}
	case <-ctx.Done():
		t.Fatal("Children on a cut link never returned")
	}
	// On the client's path or as a direct request: the client may not
	// have noticed the cut yet, while the link is closed already.
	if kids := must[[]store.Child](t)(st.Children(ctx, dir)); len(kids) != 4 {
		t.Fatalf("Children after the cut = %v; want 4 children", kids)
	}
	if err := st.Context().Err(); err != nil {
		t.Fatalf("session ended: %v", context.Cause(st.Context()))
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logged.String(), "unknown request") {
		t.Fatalf("the client saw a direct answer:\n%s", logged.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
