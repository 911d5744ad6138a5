package zkstore

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

func connectRequest(timeoutMs int32, id int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0) // protocolVersion
	b = binary.BigEndian.AppendUint64(b, 0)    // lastZxidSeen
	b = binary.BigEndian.AppendUint32(b, uint32(timeoutMs))
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, 16)
	return frame(append(b, make([]byte, 16)...))
}

func connectResponse(timeoutMs int32, id int64) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(timeoutMs))
	b = binary.BigEndian.AppendUint64(b, uint64(id))
	b = binary.BigEndian.AppendUint32(b, 16)
	return frame(append(append(b, make([]byte, 16)...), 0)) // readOnly
}

func request(xid, op int32, extra int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint32(b, uint32(op))
	return frame(append(b, make([]byte, extra)...))
}

func reply(xid int32, extra int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint64(b, 7) // zxid
	b = binary.BigEndian.AppendUint32(b, 0) // err
	return frame(append(b, make([]byte, extra)...))
}

// splits cuts n bytes into chunks of the sizes a connection might deliver:
// single bytes, sizes that split headers and length prefixes, and random
// ones.
func splits(rng *rand.Rand, n int, pattern int) []int {
	var sizes []int
	for n > 0 {
		var k int
		switch pattern {
		case 0:
			k = 1
		case 1:
			k = 3
		case 2:
			k = 7
		case 3:
			k = n // all at once
		default:
			k = 1 + rng.IntN(40)
		}
		k = min(k, n)
		sizes = append(sizes, k)
		n -= k
	}
	return sizes
}

// TestTrackerSplits feeds a conversation to a tracker in chunks of many
// sizes, and checks that each answer acknowledges the request it answers,
// with the time at which that request began to be written, and that watch
// notifications acknowledge nothing.
func TestTrackerSplits(t *testing.T) {
	base := time.Now()
	// What the client writes: the connect request, then requests of
	// several sizes, pings (xid -2, opcode 11) among them.
	up := [][]byte{
		connectRequest(2000, 0),
		request(1, 15, 40),  // create2
		request(-2, 11, 0),  // ping
		request(2, 4, 300),  // getData with a long path
		request(3, 12, 0),   // getChildren2, no body beyond the header
		request(-8, 101, 9), // setWatches
	}
	// What the server sends back: the connect response, then the answers
	// in order, with watch notifications in between.
	note := reply(-1, 30)
	down := [][]byte{
		connectResponse(1500, 0x1234),
		note,
		reply(1, 20),
		reply(-2, 0),
		note, note,
		reply(2, 5000),
		reply(3, 0),
		reply(-8, 0),
		note,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for pattern := range 12 {
		var tr tracker
		// Write frame by frame, each at its own time, but in chunks
		// that do not respect frame boundaries: a frame's time is that
		// of the chunk that holds its first byte.
		stream := slices.Concat(up...)
		starts := map[int]int{} // byte offset of each frame's start -> frame index
		off := 0
		for i, f := range up {
			starts[off] = i
			off += len(f)
		}
		want := make([]time.Time, len(up))
		off = 0
		for i, n := range splits(rng, len(stream), pattern) {
			at := base.Add(time.Duration(i) * time.Millisecond)
			for o := off; o < off+n; o++ {
				if f, ok := starts[o]; ok {
					want[f] = at
				}
			}
			tr.wrote(stream[off:off+n], at)
			off += n
		}
		var got []ack
		stream = slices.Concat(down...)
		off = 0
		for _, n := range splits(rng, len(stream), pattern) {
			if err := tr.read(stream[off:off+n], func(a ack) { got = append(got, a) }); err != nil {
				t.Fatalf("pattern %d: read = %v", pattern, err)
			}
			off += n
		}
		if len(got) != len(up) {
			t.Fatalf("pattern %d: %d acks; want %d (one per request)", pattern, len(got), len(up))
		}
		for i, a := range got {
			if !a.sent.Equal(want[i]) {
				t.Errorf("pattern %d: ack %d sent at +%v; want +%v", pattern, i, a.sent.Sub(base), want[i].Sub(base))
			}
			if a.connect != (i == 0) {
				t.Errorf("pattern %d: ack %d connect = %v", pattern, i, a.connect)
			}
			if a.leader != (i == 1) { // the create2 alone
				t.Errorf("pattern %d: ack %d leader = %v", pattern, i, a.leader)
			}
		}
		if got[0].session != 0x1234 || got[0].timeout != 1500*time.Millisecond {
			t.Errorf("pattern %d: connect ack = session %#x, timeout %v; want 0x1234, 1.5s", pattern, got[0].session, got[0].timeout)
		}
		if len(tr.sent) != 0 {
			t.Errorf("pattern %d: %d requests left unanswered; want 0", pattern, len(tr.sent))
		}
	}
}

func replyErr(xid, code int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint64(b, 7) // zxid
	b = binary.BigEndian.AppendUint32(b, uint32(code))
	return frame(b)
}

// TestTrackerLeaderAnswers checks which answers prove that their request
// passed through the leader: those to writes, multis, syncs and closes,
// successful or failed as a decided write fails, whatever the chunks the
// stream comes in; not reads, pings, watch resets, nor errors a server
// gives on its own.
func TestTrackerLeaderAnswers(t *testing.T) {
	cases := []struct {
		name   string
		op     int32
		code   int32
		leader bool
	}{
		{"create", opCreate, 0, true},
		{"create2 exists", opCreate2, errNodeExists, true},
		{"delete not empty", opDelete, errNotEmpty, true},
		{"setData no node", opSetData, errNoNode, true},
		{"setData bad version", opSetData, errBadVersion, true},
		{"multi", opMulti, 0, true},
		{"sync", opSync, 0, true},
		{"close", opCloseSession, 0, true},
		{"createContainer", opCreateContainer, 0, true},
		{"getData", 4, 0, false},
		{"getChildren2", 12, 0, false},
		{"exists", 3, errNoNode, false},
		{"ping", 11, 0, false},
		{"setWatches", 101, 0, false},
		{"auth", 100, 0, false},
		{"create throttled", opCreate, -127, false},
		{"create no auth", opCreate, -102, false},
		{"sync session expired", opSync, -112, false},
	}
	up := [][]byte{connectRequest(2000, 0)}
	down := [][]byte{connectResponse(2000, 9)}
	for i, c := range cases {
		xid := int32(i + 1)
		up = append(up, request(xid, c.op, 10))
		down = append(down, replyErr(xid, c.code), reply(-1, 3))
	}
	for pattern := range 5 {
		rng := rand.New(rand.NewPCG(3, uint64(pattern)))
		var tr tracker
		stream := slices.Concat(up...)
		for off, n := range chunks(splits(rng, len(stream), pattern)) {
			tr.wrote(stream[off:off+n], time.Now())
		}
		var got []ack
		stream = slices.Concat(down...)
		for off, n := range chunks(splits(rng, len(stream), pattern)) {
			must(t, tr.read(stream[off:off+n], func(a ack) { got = append(got, a) }))
		}
		if len(got) != len(cases)+1 {
			t.Fatalf("pattern %d: %d acks; want %d", pattern, len(got), len(cases)+1)
		}
		for i, c := range cases {
			if a := got[i+1]; a.leader != c.leader {
				t.Errorf("pattern %d: %s: leader = %v; want %v", pattern, c.name, a.leader, c.leader)
			}
		}
	}
}

// chunks yields the offset and size of each of sizes, laid end to end.
func chunks(sizes []int) func(func(int, int) bool) {
	return func(yield func(int, int) bool) {
		off := 0
		for _, n := range sizes {
			if !yield(off, n) {
				return
			}
			off += n
		}
	}
}

// TestTrackerEarlyAnswers checks that answers acknowledge only what was
// sent before them, when requests and answers interleave.
func TestTrackerEarlyAnswers(t *testing.T) {
	base := time.Now()
	var tr tracker
	var got []time.Time
	acked := func(a ack) { got = append(got, a.sent) }
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	tr.wrote(connectRequest(2000, 0), at(0))
	must(t, tr.read(connectResponse(2000, 9), acked))
	tr.wrote(slices.Concat(request(1, 4, 3), request(2, 4, 3)), at(10))
	tr.wrote(request(-2, 11, 0), at(20))
	must(t, tr.read(reply(1, 0), acked))
	must(t, tr.read(reply(-1, 3), acked)) // notification
	tr.wrote(request(3, 4, 3), at(30))
	must(t, tr.read(slices.Concat(reply(2, 0), reply(-2, 0)), acked))
	want := []time.Time{at(0), at(10), at(10), at(20)}
	if !slices.EqualFunc(got, want, time.Time.Equal) {
		t.Errorf("acks = %v; want %v", got, want)
	}
	if len(tr.sent) != 1 || !tr.sent[0].at.Equal(at(30)) {
		t.Errorf("unanswered = %v; want the request sent at +30ms", tr.sent)
	}
}

// TestTrackerNotZooKeeper checks that a peer whose first message cannot be
// a connect response is refused before the client reads an absurd length
// (an HTTP server's "HTTP" reads as 1.2 GB).
func TestTrackerNotZooKeeper(t *testing.T) {
	for _, first := range []string{"HTTP/1.1 400 Bad Request\r\n\r\n", "\x00\x00\x00\x02ab"} {
		var tr tracker
		tr.wrote(connectRequest(2000, 0), time.Now())
		// Byte by byte: the length is refused as soon as it is known.
		var err error
		for i := 0; i < len(first) && err == nil; i++ {
			err = tr.read([]byte{first[i]}, func(ack) { t.Errorf("ack from a peer that is not ZooKeeper") })
			if err != nil && i != 3 {
				t.Errorf("read(%q) failed at byte %d; want at byte 3, once the length is known", first, i)
			}
		}
		if !errors.Is(err, errNotZooKeeper) {
			t.Errorf("read(%q) = %v; want errNotZooKeeper", first, err)
		}
	}
}

// TestStandIn checks the stand-in's answers as the tracker parses them:
// the handshake grants the session asked for, a request fails, a ping and
// a close succeed, and the stream ends after the close.
func TestStandIn(t *testing.T) {
	c := newStandIn()
	defer c.Close()
	var tr tracker
	for _, f := range [][]byte{connectRequest(1500, 0x77), request(5, 4, 10), request(-2, 11, 0), request(6, -11, 0)} {
		tr.wrote(f, time.Now())
		if _, err := c.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	var acks []ack
	var codes []int32
	buf := make([]byte, 5) // small reads: the stand-in must split its output too
	var all []byte
	for {
		n, err := c.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			break
		}
	}
	must(t, tr.read(all, func(a ack) { acks = append(acks, a) }))
	for off := 4 + 4 + 4 + 8 + 4 + 16 + 4; off < len(all); off += 4 + 16 {
		codes = append(codes, int32(binary.BigEndian.Uint32(all[off+12:])))
	}
	if len(acks) != 4 || acks[0].session != 0x77 || acks[0].timeout != 1500*time.Millisecond {
		t.Fatalf("acks = %+v; want 4, the first granting session 0x77 for 1.5s", acks)
	}
	if want := []int32{errCodeExpired, 0, 0}; !slices.Equal(codes, want) {
		t.Errorf("error codes = %v; want %v", codes, want)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
