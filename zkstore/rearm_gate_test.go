package zkstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/iotest"
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

// gateReader reads through g from src, as the client's receive loop reads
// a link.
func gateReader(g *gate, src io.Reader) io.Reader {
	return readerFunc(func(p []byte) (int, error) { return g.read(p, src.Read) })
}

func TestGatePassesWhatCarriesNoZxid(t *testing.T) {
	frames := [][]byte{
		answer(1, 0, 0),   // re-sent credentials
		answer(-2, 9, 0),  // ping
		answer(-1, -1, 9), // notification
	}
	g := newGate()
	g.request(request(1, opSetAuth, 20)[:4+headLen])
	g.hangUp() // a frame the gate held would fail to arrive
	r := gateReader(g, bytes.NewReader(slices.Concat(frames...)))
	for i, want := range frames {
		got, err := readFrame(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d through a closed gate = %x, %v; want %x", i, got, err, want)
		}
	}
}

func TestGateHoldsAnswersWithZxidUntilOpen(t *testing.T) {
	frames := [][]byte{answer(5, 42, 80), answer(6, 43, 3), answer(-1, -1, 9)}

	// Closed: the answer is held, here until the link is closed.
	g := newGate()
	g.hangUp()
	if got, err := readFrame(gateReader(g, bytes.NewReader(slices.Concat(frames...)))); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("an answer with a zxid through a closed gate = %x, %v; want %v", got, err, io.ErrClosedPipe)
	}

	// Opened while the answer waits: it comes through whole, then
	// everything else.
	g = newGate()
	r := gateReader(g, bytes.NewReader(slices.Concat(frames...)))
	type result struct {
		frame []byte
		err   error
	}
	first := make(chan result, 1)
	go func() {
		f, err := readFrame(r)
		first <- result{f, err}
	}()
	g.open()
	select {
	case got := <-first:
		if got.err != nil || !bytes.Equal(got.frame, frames[0]) {
			t.Fatalf("held answer after the gate opened = %x, %v; want %x", got.frame, got.err, frames[0])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("held answer not delivered after the gate opened")
	}
	for i, want := range frames[1:] {
		got, err := readFrame(r)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("frame %d through an open gate = %x, %v; want %x", i+1, got, err, want)
		}
	}
	if !g.passing {
		t.Errorf("an open gate with nothing peeked does not read straight through")
	}
}

// TestGateHidesFailureUntilOpen checks what the client sees of a link that
// fails before it re-armed its watches on it: writes succeed (and write
// nothing once one failed), the credentials it awaits are answered, and
// the failure comes only once the gate opens.
func TestGateHidesFailureUntilOpen(t *testing.T) {
	g := newGate()
	broken := errors.New("broken link")
	writes := 0
	w := func(p []byte) (int, error) { writes++; return 0, broken }
	if g.write([]byte("a"), w) || g.write([]byte("b"), w) || writes != 1 {
		t.Fatalf("writes on a failed link: %d attempted; want 1, and none reported written", writes)
	}
	g.request(request(7, opSetAuth, 20)[:4+headLen])
	r := gateReader(g, iotest.ErrReader(broken))
	got, err := readFrame(r)
	if h, ok := parseReply(got[4:]); err != nil || !ok || h != (replyHeader{xid: 7}) || len(got) != 4+16 {
		t.Fatalf("read awaiting credentials on a failed link = %x, %v; want their answer, success", got, err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := readFrame(r)
		failed <- err
	}()
	g.open()
	select {
	case err := <-failed:
		if !errors.Is(err, broken) {
			t.Fatalf("read on a failed link once the gate opened = %v; want %v", err, broken)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("read on a failed link still waits once the gate opened")
	}
}

// TestGateAnswersCredentialsSentAfterFailure: the link fails before the
// client sends its credentials again; the reader, already holding the
// failure, answers them once they are sent.
func TestGateAnswersCredentialsSentAfterFailure(t *testing.T) {
	g := newGate()
	r := gateReader(g, iotest.ErrReader(io.EOF))
	type result struct {
		frame []byte
		err   error
	}
	got := make(chan result, 1)
	go func() {
		f, err := readFrame(r)
		got <- result{f, err}
	}()
	g.request(request(9, opSetAuth, 20)[:4+headLen])
	select {
	case res := <-got:
		if h, ok := parseReply(res.frame[min(4, len(res.frame)):]); res.err != nil || !ok || h != (replyHeader{xid: 9}) {
			t.Fatalf("read awaiting credentials sent after the failure = %x, %v; want their answer", res.frame, res.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("credentials sent after the link failed are never answered")
	}
}

func TestGateWaitEndsWhenLinkCloses(t *testing.T) {
	g := newGate()
	done := make(chan error, 1)
	go func() {
		_, err := g.read(make([]byte, 4), iotest.ErrReader(io.EOF).Read)
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
