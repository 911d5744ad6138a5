package zkstore

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"testing"
	"time"
)

// answerAt is a server's answer with the given xid and zxid.
func answerAt(xid int32, zxid int64, extra int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint64(b, uint64(zxid))
	b = binary.BigEndian.AppendUint32(b, 0) // err
	return frame(append(b, bytes.Repeat([]byte{0xab}, extra)...))
}

// setWatches is go-zookeeper's SetWatches request, carrying zxid.
func setWatches(xid int32, zxid int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(opSetWatches))
	b = binary.BigEndian.AppendUint64(b, uint64(zxid))
	for range 3 { // one path in each list
		b = binary.BigEndian.AppendUint32(b, 1)
		b = binary.BigEndian.AppendUint32(b, 2)
		b = append(b, "/w"...)
	}
	return frame(b)
}

// zxidLink is one connection of a client that uses z, fed in chunks cut
// by pattern.
type zxidLink struct {
	t       *testing.T
	tr      tracker
	rng     *rand.Rand
	pattern int
}

func (l *zxidLink) feed(p []byte, f func([]byte)) []byte {
	out := slices.Clone(p)
	rest := out
	for _, n := range splits(l.rng, len(rest), l.pattern) {
		f(rest[:n])
		rest = rest[n:]
	}
	return out
}

// write returns p as the link sends it.
func (l *zxidLink) write(p []byte) []byte {
	return l.feed(p, func(b []byte) { l.tr.wrote(b, time.Now()) })
}

// read returns p as the client reads it.
func (l *zxidLink) read(p []byte) []byte {
	return l.feed(p, func(b []byte) {
		if err := l.tr.read(b, func(ack) {}); err != nil {
			l.t.Fatal(err)
		}
	})
}

func field(p []byte, at int) int64 { return int64(binary.BigEndian.Uint64(p[4+at:])) }

// TestZxidsKeptForTheClient follows a session over several connections,
// each fed in chunks of many sizes, and checks that the client never reads
// an answer's zxid (so that go-zookeeper never writes the zxid it races
// on), that its connect requests carry the latest zxid it read, and that
// its SetWatches requests carry the zxid seen when the oldest reconnection
// whose watches the server has not confirmed began.
func TestZxidsKeptForTheClient(t *testing.T) {
	for pattern := range 8 {
		z := &zxids{}
		rng := rand.New(rand.NewPCG(uint64(pattern), 9))
		dial := func() *zxidLink {
			return &zxidLink{t: t, tr: tracker{z: z}, rng: rng, pattern: pattern}
		}
		connect := func(l *zxidLink, asked, granted int64) int64 {
			t.Helper()
			sent := l.write(connectRequest(4000, asked))
			l.read(connectResponse(4000, granted))
			return field(sent, 4)
		}
		// A new session: it has seen nothing.
		l := dial()
		if got := connect(l, 0, 5); got != 0 {
			t.Fatalf("pattern %d: a new session's connect request carries zxid %d; want 0", pattern, got)
		}
		l.write(request(1, 4, 10))
		in := answerAt(1, 42, 30)
		if got := l.read(in); field(got, 4) != 0 || !bytes.Equal(got[16:], in[16:]) || !bytes.Equal(got[:8], in[:8]) {
			t.Fatalf("pattern %d: the client reads answer %x as %x; want its zxid zeroed, nothing else", pattern, in, got)
		}
		for _, in := range [][]byte{answerAt(-1, -1, 20), answerAt(-2, 50, 0)} {
			if got := l.read(in); !bytes.Equal(got, in) {
				t.Fatalf("pattern %d: the client reads %x as %x; want it as sent", pattern, in, got)
			}
		}
		// Reconnected: the connect request carries the latest zxid of an
		// answer (not of the ping), and so does the SetWatches request.
		l = dial()
		if got := connect(l, 5, 5); got != 42 {
			t.Fatalf("pattern %d: connect request after a reconnection carries %d; want 42", pattern, got)
		}
		l.write(request(2, 4, 10))
		l.read(answerAt(2, 60, 0)) // answered before the re-arm is written
		if got := field(l.write(setWatches(3, 0)), 8); got != 42 {
			t.Fatalf("pattern %d: SetWatches carries %d; want 42, the zxid seen before the reconnection", pattern, got)
		}
		// Lost before the server answered it: the next connection re-arms
		// from the same zxid, though it has seen more since.
		l = dial()
		if got := connect(l, 5, 5); got != 60 {
			t.Fatalf("pattern %d: connect request carries %d; want 60", pattern, got)
		}
		if got := field(l.write(setWatches(4, 0)), 8); got != 42 {
			t.Fatalf("pattern %d: SetWatches after an unconfirmed re-arm carries %d; want 42", pattern, got)
		}
		l.read(answerAt(4, 61, 0))
		// Confirmed: the next reconnection re-arms from what it has seen.
		l = dial()
		connect(l, 5, 5)
		if got := field(l.write(setWatches(5, 0)), 8); got != 61 {
			t.Fatalf("pattern %d: SetWatches after a confirmed re-arm carries %d; want 61", pattern, got)
		}
		// The session expired: the client starts again from nothing.
		l = dial()
		connect(l, 5, 0)
		if got := connect(dial(), 0, 6); got != 0 {
			t.Fatalf("pattern %d: connect request after the session expired carries %d; want 0", pattern, got)
		}
	}
}

// TestLinkLeavesTheClientsBufferAlone checks that a link writes the
// Store's zxid into what it sends, not into the client's buffer (an
// io.Writer must not change it).
func TestLinkLeavesTheClientsBufferAlone(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	s := &Store{}
	s.zxids.seen = 77
	l := &link{Conn: client, s: s}
	l.t.z = &s.zxids
	p := connectRequest(4000, 5)
	orig := slices.Clone(p)
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, len(p))
		_, err := server.Read(b)
		if err != nil {
			b = nil
		}
		got <- b
	}()
	if n, err := l.Write(p); n != len(p) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if !bytes.Equal(p, orig) {
		t.Errorf("Write changed the client's buffer: %x; want %x", p, orig)
	}
	if sent := <-got; sent == nil || field(sent, 4) != 77 {
		t.Errorf("the connect request went out as %x; want lastZxidSeen 77", sent)
	}
}

// countingConn counts the reads of the connection under a link.
type countingConn struct {
	net.Conn
	reads int
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.reads++
	return c.Conn.Read(p)
}

// TestLinkReadsFramesTogether sends a link many answers at once and one
// larger than its buffer, and reads them as go-zookeeper does, the length
// and then the body of each: every frame arrives whole, with its zxid
// zeroed (the tracker follows what the client is handed), and the small
// ones take far fewer reads of the connection than the client makes.
func TestLinkReadsFramesTogether(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	defer server.Close()
	s := &Store{}
	cc := &countingConn{Conn: client}
	l := &link{Conn: cc, s: s}
	l.t.z = &s.zxids
	var want [][]byte
	stream := connectResponse(4000, 5)
	for i := range 20 {
		f := answerAt(int32(i+1), int64(100+i), 30)
		stream = append(stream, f...)
		want = append(want, f)
	}
	big := answerAt(99, 500, 3*readBuf)
	stream = append(stream, big...)
	want = append(want, big)
	go func() {
		server.Write(stream)
		server.Close()
	}()
	if _, err := readFrame(l); err != nil { // the connect response
		t.Fatal(err)
	}
	for i, w := range want {
		got, err := readFrame(l)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if field(got, 4) != 0 || !bytes.Equal(got[16:], w[16:]) || !bytes.Equal(got[:8], w[:8]) {
			t.Fatalf("frame %d read as %x...; want %x... with its zxid zeroed", i, got[:min(len(got), 24)], w[:min(len(w), 24)])
		}
	}
	if got := s.zxids.lastSeen(); got != 500 {
		t.Errorf("seen zxid %d after the last answer; want 500", got)
	}
	// 22 frames, 44 reads by the client; a pipe hands over one write in
	// pieces no larger than each read asks for.
	t.Logf("%d reads of the connection", cc.reads)
	if cc.reads > 8 {
		t.Errorf("%d reads of the connection for 22 frames; want the buffer to serve most of the client's 44", cc.reads)
	}
}

// readFrame reads one frame the way go-zookeeper's receive loop does: the
// length, then the body.
func readFrame(r io.Reader) ([]byte, error) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(head))
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return append(head, body...), nil
}
