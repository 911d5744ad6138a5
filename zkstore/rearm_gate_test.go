package zkstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
	"testing"
	"time"
)

// answer is a server frame after the handshake with the given header.
func answer(xid int32, zxid int64, extra int) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(xid))
	b = binary.BigEndian.AppendUint64(b, uint64(zxid))
	b = binary.BigEndian.AppendUint32(b, 0)
	return frame(append(b, bytes.Repeat([]byte{byte(xid)}, extra)...))
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

func TestGatePassesWhatCarriesNoZxid(t *testing.T) {
	frames := [][]byte{
		answer(1, 0, 0),   // re-sent credentials
		answer(-2, 9, 0),  // ping
		answer(-1, -1, 9), // notification
	}
	src := bytes.NewReader(slices.Concat(frames...))
	g := &gate{opened: make(chan struct{}), hungUp: make(chan struct{})}
	r := readerFunc(func(p []byte) (int, error) { return g.read(p, src.Read) })
	g.setReadDeadline(time.Now().Add(time.Minute))
	for i, want := range frames {
		got, err := readFrame(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d through a closed gate = %x, %v; want %x", i, got, err, want)
		}
	}
}

func TestGateHoldsAnswersWithZxidUntilOpen(t *testing.T) {
	frames := [][]byte{answer(5, 42, 80), answer(6, 43, 3), answer(-1, -1, 9)}
	src := bytes.NewReader(slices.Concat(frames...))
	g := &gate{opened: make(chan struct{}), hungUp: make(chan struct{})}
	r := readerFunc(func(p []byte) (int, error) { return g.read(p, src.Read) })

	// Closed: the answer waits for the client's read deadline.
	g.setReadDeadline(time.Now().Add(50 * time.Millisecond))
	if got, err := readFrame(r); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("an answer with a zxid through a closed gate = %x, %v; want %v", got, err, os.ErrDeadlineExceeded)
	}
	// Open: it comes through whole, then everything else.
	g.open()
	g.setReadDeadline(time.Time{})
	for i, want := range frames {
		got, err := readFrame(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d through an open gate = %x, %v; want %x", i, got, err, want)
		}
	}
	if !g.passing {
		t.Errorf("an open gate with nothing peeked does not read straight through")
	}
}

func TestGateWaitEndsWhenLinkCloses(t *testing.T) {
	src := bytes.NewReader(answer(5, 42, 0))
	g := &gate{opened: make(chan struct{}), hungUp: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := g.read(make([]byte, 4), src.Read)
		done <- err
	}()
	g.hangUp()
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("read on a closed link = %v; want %v", err, io.ErrClosedPipe)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read on a closed link still waits")
	}
}

// TestRearmFollowsRequests checks what the Store learns from the frames:
// the sentinel's request and its answer arm the guard (no other answer
// does), and a SetWatches request is recognised.
func TestRearmFollowsRequests(t *testing.T) {
	var r rearm
	path := binary.BigEndian.AppendUint32(nil, uint32(len(sentinelPath)))
	path = append(append(path, sentinelPath...), 1)
	sentinel := request(7, opExists, 0)
	sentinel = frame(append(sentinel[4:], path...))
	other := frame(append(request(8, opExists, 0)[4:], append(binary.BigEndian.AppendUint32(nil, 4), "/abc\x01"...)...))
	head := func(f []byte) []byte { return f[:min(len(f), 4+headLen)] }

	if r.request(head(other)) || r.request(head(sentinel)) {
		t.Fatalf("an exists request taken for SetWatches")
	}
	if !r.request(head(request(9, opSetWatches, 40))) {
		t.Fatalf("SetWatches not recognised")
	}
	if g := r.newGate(); g != nil {
		t.Fatalf("a gate before the sentinel is armed")
	}
	r.replied(replyHeader{xid: 8, zxid: 3, err: errNoNode})
	r.replied(replyHeader{xid: 7, zxid: 3, err: 0})
	if r.armed.Load() {
		t.Fatalf("armed by an answer that does not set the sentinel watch")
	}
	r.replied(replyHeader{xid: 7, zxid: 3, err: errNoNode})
	if !r.armed.Load() || r.newGate() == nil {
		t.Fatalf("not armed by the sentinel's answer")
	}
}
