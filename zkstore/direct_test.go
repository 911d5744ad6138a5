package zkstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/store"
)

// linkPair is a link as the client gets it from the dialer, on one end of a
// pipe whose other end plays the server, for a Store with nauth
// credentials.
func linkPair(t *testing.T, nauth int) (*link, net.Conn) {
	t.Helper()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	s := &Store{noTimer: true, base: time.Now(), nauth: nauth, links: map[*link]struct{}{}}
	l := &link{Conn: client, s: s, handshakeBy: time.Now().Add(time.Minute)}
	s.links[l] = struct{}{}
	return l, server
}

// clientReads reads one frame from l as the client does: its length, then
// its body.
func clientReads(t *testing.T, l *link) []byte {
	t.Helper()
	var head [4]byte
	if _, err := io.ReadFull(l, head[:]); err != nil {
		t.Fatalf("client reads a frame's length: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(head[:]))
	if _, err := io.ReadFull(l, body); err != nil {
		t.Fatalf("client reads a frame's body: %v", err)
	}
	return append(head[:], body...)
}

// serve writes stream to conn in chunks of the sizes splits gives, from a
// goroutine the test waits for.
func serve(t *testing.T, conn net.Conn, stream []byte, sizes []int) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		for _, n := range sizes {
			if _, err := conn.Write(stream[:n]); err != nil {
				done <- err
				return
			}
			stream = stream[n:]
		}
		done <- nil
	}()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("server writes: %v", err)
		}
	})
}

// drain reads everything written to conn, as a server that answers later.
func drain(t *testing.T, conn net.Conn) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(io.Discard, conn)
	}()
	t.Cleanup(func() { conn.Close(); <-done })
}

// TestLinkRoutesDirectAnswers plays a server that answers direct requests
// among the client's frames, in chunks of many sizes, a long answer that
// spans the link's buffer and one exactly as long as it, length included
// (the longest gathered in it), among them: the client reads each of its
// frames whole and in order and never a byte of the direct answers, which
// reach their directs whole.
func TestLinkRoutesDirectAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	long := bytes.Repeat([]byte("x"), 3*readBuf+5)
	for pattern := range 8 {
		l, server := linkPair(t, 0)
		drain(t, server)
		if _, err := l.Write(connectRequest(3000, 0)); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Write(request(41, 12, 9)); err != nil {
			t.Fatal(err)
		}
		// Three direct requests; their xids follow the client's.
		var got [3][]byte
		var xids [3]int32
		for i := range got {
			xids[i] = l.ownXid()
			d := &direct{xid: xids[i], answer: func(body []byte, err error) {
				if err != nil {
					t.Errorf("direct %d: %v", i, err)
				}
				got[i] = slices.Clone(body)
			}}
			l.send(request(xids[i], opGetChildren2, 5), d)
			if xids[i] < 41+1<<29 {
				t.Fatalf("direct xid %d; want one far above the client's latest (41)", xids[i])
			}
		}
		note := reply(-1, 30)
		short := append(reply(xids[0], 0), 1, 2, 3)
		binary.BigEndian.PutUint32(short, uint32(len(short)-4))
		big := append(reply(xids[1], 0), long...)
		binary.BigEndian.PutUint32(big, uint32(len(big)-4))
		mid := append(reply(xids[2], 0), long[:readBuf-20]...) // 4+size = readBuf
		binary.BigEndian.PutUint32(mid, uint32(len(mid)-4))
		clientFrames := [][]byte{connectResponse(3000, 0x77), note, reply(41, 200), note, reply(-2, 0)}
		// In the order the server answers: the connect request, 41, then
		// the directs, with notifications and a ping's answer between.
		stream := slices.Concat(clientFrames[0], clientFrames[1], clientFrames[2], short, clientFrames[3], big, mid, clientFrames[4])
		serve(t, server, stream, splits(rng, len(stream), pattern))
		for i, want := range clientFrames {
			if f := clientReads(t, l); !bytes.Equal(f, want) {
				t.Fatalf("pattern %d: client's frame %d = % x...; want % x...", pattern, i, f[:min(len(f), 16)], want[:min(len(want), 16)])
			}
		}
		if !bytes.Equal(got[0], short[4:]) || !bytes.Equal(got[1], big[4:]) || !bytes.Equal(got[2], mid[4:]) {
			t.Fatalf("pattern %d: direct answers of %d, %d and %d bytes; want %d, %d and %d", pattern, len(got[0]), len(got[1]), len(got[2]), len(short)-4, len(big)-4, len(mid)-4)
		}
		l.mu.Lock()
		left := len(l.own)
		l.mu.Unlock()
		if left != 0 {
			t.Fatalf("pattern %d: %d directs still filed after their answers", pattern, left)
		}
	}
}

// TestLinkOffersAfterCredentials: a link takes direct requests once its
// connect response accepted the session and, for a session with
// credentials, the server has answered as many setAuth requests (the
// client sends them first on each connection); never once it is closed.
func TestLinkOffersAfterCredentials(t *testing.T) {
	for _, nauth := range []int{0, 2} {
		l, server := linkPair(t, nauth)
		drain(t, server)
		if _, err := l.Write(connectRequest(3000, 0)); err != nil {
			t.Fatal(err)
		}
		frames := [][]byte{connectResponse(3000, 0x77)}
		for i := range nauth {
			if _, err := l.Write(request(int32(i+1), opSetAuth, 20)); err != nil {
				t.Fatal(err)
			}
			frames = append(frames, reply(int32(i+1), 0))
		}
		serve(t, server, slices.Concat(frames...), []int{len(slices.Concat(frames...))})
		for i := range frames {
			if live := l.s.directLink(); live != nil {
				t.Fatalf("nauth %d: link offered after %d of its answers", nauth, i)
			}
			clientReads(t, l)
		}
		if l.s.directLink() != l {
			t.Fatalf("nauth %d: link not offered after the session's credentials were answered", nauth)
		}
		var failed error
		d := &direct{xid: l.ownXid(), answer: func(_ []byte, err error) { failed = err }}
		l.send(request(d.xid, opGetChildren2, 5), d)
		if failed != nil {
			t.Fatal(failed)
		}
		l.Close()
		if l.s.directLink() != nil {
			t.Fatal("a closed link is still offered")
		}
		if !errors.Is(failed, zk.ErrConnectionClosed) {
			t.Fatalf("a direct pending when its link closed got %v; want ErrConnectionClosed", failed)
		}
		failed = nil
		d.xid = l.ownXid()
		l.send(request(d.xid, opGetChildren2, 5), d)
		if !errors.Is(failed, zk.ErrConnectionClosed) {
			t.Fatalf("a direct sent on a closed link got %v; want ErrConnectionClosed", failed)
		}
	}
}

// TestDecodeChildren2 parses an answer as the server writes it, and fails
// every truncation of it with errMalformed rather than panicking.
func TestDecodeChildren2(t *testing.T) {
	b := reply(9, 0)[4:]
	b = binary.BigEndian.AppendUint32(b, 2)
	for _, name := range []string{"lock-0000000001", "b"} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(name)))
		b = append(b, name...)
	}
	for _, v := range []uint64{11, 12, 13, 14} { // czxid, mzxid, ctime, mtime
		b = binary.BigEndian.AppendUint64(b, v)
	}
	for _, v := range []uint32{3, 4, 5} { // version, cversion, aversion
		b = binary.BigEndian.AppendUint32(b, v)
	}
	b = binary.BigEndian.AppendUint64(b, 0x99) // ephemeralOwner
	b = binary.BigEndian.AppendUint32(b, 6)    // dataLength
	b = binary.BigEndian.AppendUint32(b, 2)    // numChildren
	b = binary.BigEndian.AppendUint64(b, 15)   // pzxid
	answer := slices.Clone(b)
	names, st, err := decodeChildren2(b)
	if err != nil {
		t.Fatal(err)
	}
	want := zk.Stat{Czxid: 11, Mzxid: 12, Ctime: 13, Mtime: 14, Version: 3, Cversion: 4, Aversion: 5, EphemeralOwner: 0x99, DataLength: 6, NumChildren: 2, Pzxid: 15}
	if !slices.Equal(names, []string{"lock-0000000001", "b"}) || *st != want {
		t.Fatalf("decodeChildren2 = %q, %+v; want the names and %+v", names, *st, want)
	}
	clear(b) // the link reads the next answer into the same buffer
	if !slices.Equal(names, []string{"lock-0000000001", "b"}) {
		t.Fatalf("decodeChildren2's names = %q after the answer's buffer was reused; want copies", names)
	}
	b = slices.Clone(answer)
	for n := range len(b) {
		if _, _, err := decodeChildren2(b[:n]); !errors.Is(err, errMalformed) {
			t.Fatalf("decodeChildren2 of %d of %d bytes = %v; want errMalformed", n, len(b), err)
		}
	}
	noNode := slices.Clone(reply(9, 0)[4:])
	binary.BigEndian.PutUint32(noNode[12:], uint32(0xffffff9b)) // -101
	if _, _, err := decodeChildren2(noNode); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("decodeChildren2 of a NoNode answer = %v; want zk.ErrNoNode", err)
	}
}

// TestDecodeCreates parses the answers of a create and of a multi request
// of creates as the server writes them, fails every truncation of them
// with errMalformed rather than panicking, and gives a failed multi the
// error of the operation that failed it.
func TestDecodeCreates(t *testing.T) {
	str := func(b []byte, v string) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
		return append(b, v...)
	}
	head := func(b []byte, op int32, done bool, err int32) []byte {
		b = binary.BigEndian.AppendUint32(b, uint32(op))
		if done {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		return binary.BigEndian.AppendUint32(b, uint32(err))
	}
	created := str(slices.Clone(reply(9, 0)[4:]), "/d/a-0000000001")
	if p, err := decodeCreated(created); err != nil || p != "/d/a-0000000001" {
		t.Fatalf("decodeCreated = %q, %v; want the path", p, err)
	}
	multi := slices.Clone(reply(9, 0)[4:])
	for _, p := range []string{"/d/a-0000000001", "/d/b-0000000002"} {
		multi = str(head(multi, opCreate, false, 0), p)
	}
	multi = head(multi, -1, true, -1)
	if ps, err := decodeMulti(multi); err != nil || !slices.Equal(ps, []string{"/d/a-0000000001", "/d/b-0000000002"}) {
		t.Fatalf("decodeMulti = %q, %v; want the two paths", ps, err)
	}
	for name, b := range map[string][]byte{"create": created, "multi": multi} {
		decode := func(b []byte) error { _, err := decodeCreated(b); return err }
		if name == "multi" {
			decode = func(b []byte) error { _, err := decodeMulti(b); return err }
		}
		for n := range len(b) {
			if err := decode(b[:n]); !errors.Is(err, errMalformed) {
				t.Fatalf("%s: decode of %d of %d bytes = %v; want errMalformed", name, n, len(b), err)
			}
		}
	}
	failed := slices.Clone(reply(9, 0)[4:])
	for _, code := range []int32{errRuntimeInconsistency, -110, errRuntimeInconsistency} { // the second exists
		failed = binary.BigEndian.AppendUint32(head(failed, -1, false, code), uint32(code))
	}
	failed = head(failed, -1, true, -1)
	var answered *answeredErr
	if _, err := decodeMulti(failed); !errors.Is(err, zk.ErrNodeExists) || !errors.As(err, &answered) {
		t.Fatalf("decodeMulti of a failed multi = %v; want the server's ErrNodeExists", err)
	}
	if _, err := decodeMulti(head(slices.Clone(reply(9, 0)[4:]), 5, false, 0)); !errors.Is(err, errMalformed) {
		t.Fatalf("decodeMulti of an unknown operation = %v; want errMalformed", err)
	}
}

// TestLinkSendFails: a write that fails answers every direct request it
// carried with its error, at once, and closes the link.
func TestLinkSendFails(t *testing.T) {
	l, server := linkPair(t, 0)
	drain(t, server)
	if _, err := l.Write(connectRequest(3000, 0)); err != nil {
		t.Fatal(err)
	}
	serve(t, server, connectResponse(3000, 0x77), []int{len(connectResponse(3000, 0x77))})
	clientReads(t, l)
	if l.s.directLink() != l {
		t.Fatal("link not offered once the session is up")
	}
	server.Close()
	var failed [2]error
	var ds []*direct
	var frames []byte
	for i := range failed {
		d := &direct{xid: l.ownXid(), answer: func(_ []byte, err error) { failed[i] = err }}
		ds = append(ds, d)
		frames = append(frames, request(d.xid, opGetChildren2, 5)...)
	}
	l.send(frames, ds...)
	for i, err := range failed {
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("direct %d of a failed write got %v; want the write's error", i, err)
		}
	}
	if l.s.directLink() != nil {
		t.Fatal("a link whose write failed is still offered")
	}
}

// TestChildrenSorted: children sorts a listing as store.SortChildren does,
// also where its quick sort by number cannot: a name that is not
// sequential, two names with one number, a number past 32 bits.
func TestChildrenSorted(t *testing.T) {
	seqs := func(prefix string, from, n int) []string {
		var s []string
		for i := range n {
			s = append(s, prefix+store.FormatSeq(int64(from+i)))
		}
		return s
	}
	for _, names := range [][]string{
		nil,
		seqs("_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-lock-", 1000, 128),
		seqs("lock-", 0, 3),
		append(seqs("lock-", 7, 5), "config", "items"),
		append(seqs("lock-", 7, 5), "x"+store.FormatSeq(9)),
		append(seqs("lock-", 7, 5), "x9999999999", "x4294967296"),
	} {
		want := make([]store.Child, len(names))
		for i, name := range names {
			seq, _ := store.ParseSeq(name)
			want[i] = store.Child{Name: name, Seq: seq}
		}
		store.SortChildren(want)
		for range 5 {
			shuffled := slices.Clone(names)
			rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if got := children(shuffled); !slices.Equal(got, want) {
				t.Fatalf("children(%q) = %v; want %v", shuffled, got, want)
			}
		}
	}
}

// BenchmarkChildren: a listing of 128 sequential names, in the server's
// order, into children: by number alone (children) and by comparison
// (sortChildren), the sort a listing of other names falls back to.
func BenchmarkChildren(b *testing.B) {
	names := make([]string, 128)
	for i := range names {
		names[i] = "_c_0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10-lock-" + store.FormatSeq(int64(1000+i))
	}
	rand.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	for _, v := range []struct {
		name string
		sort func([]string) []store.Child
	}{{"by-number", children}, {"by-comparison", sortChildren}} {
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				v.sort(names)
			}
		})
	}
}
