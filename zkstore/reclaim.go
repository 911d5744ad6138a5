package zkstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/corral-go/corral/internal/reclaim"
	"github.com/corral-go/corral/store"
)

// Directories made implicitly, and taken back (see Parents in store's doc).
//
// A directory Create makes is a container node holding dirMark (makeDir).
// The session that deletes its last node takes it too, and each directory
// above it left empty, up to the first made explicitly (reclaim); the
// server's reaper catches those emptied by a session's end.
//
// Not at once, by default: every write costs ZooKeeper a turn of its commit
// pipeline, and a name locked and unlocked over and over would pay two
// more per cycle (its directory's delete and create), which halves the
// cycles a second of an uncontended lock (measured: 1,250 against 600 on
// 2 cores). So a Store notes each directory it emptied and
// removes it once [WithReclaimDelay] has passed without this Store
// creating in it again (internal/reclaim): a name in use keeps its directory
// and pays nothing; one no longer used pays one delete, off its caller's
// path. Close removes what is still due before the session ends.
//
// With a delay of 0 the removal is at once, and costs no round trip: a
// Store remembers, for the directories it made or read, whether each is
// one Create made (dirs), so that
//   - a delete in a directory known as ours sends the delete of the
//     directory right behind the node's, without waiting for its reply (the
//     server runs a session's requests in order), and the directory's
//     delete fails harmlessly (ErrNotEmpty) when a contender is still in it;
//   - a create in a directory this Store removed itself sends the
//     directory's create right before the node's.
//
// The directory's delete is conditional on version 0: one whose data was
// set since is kept. The knowledge is of one incarnation of a directory:
// a listing (CreateAndList) that finds other data drops it, and so does any
// outcome of a directory's delete but ErrNotEmpty. A directory made again
// explicitly, by someone else, after this Store last listed it and before
// it deletes a node it created there since with a plain Create, would be
// taken for the one this Store made; no recipe does that.

// DefaultReclaimDelay is how long, by default, a Store keeps a directory
// Create made after it deleted the last node in it (see
// [WithReclaimDelay]).
const DefaultReclaimDelay = reclaim.DefaultDelay

// WithReclaimDelay sets how long a Store keeps a directory Create made
// (see Parents in package store) after it deleted the last node in it: a
// Store that creates in it again within d keeps it, at no cost, and one
// that does not removes it then (one request); Close removes those still
// due. 0 removes it at once, right behind the node's delete, at no extra
// round trip but two more writes per cycle for a name used over and over;
// a negative d is invalid ([store.ErrInvalidArgument] from Open).
func WithReclaimDelay(d time.Duration) Option {
	return func(o *options) {
		if d < 0 {
			o.invalid = append(o.invalid, fmt.Sprintf("negative reclaim delay %v", d))
			return
		}
		o.reclaimDelay = d
	}
}

// maxFlush bounds how long Close spends removing the directories still
// due: they are the server's reaper's after that.
const maxFlush = time.Second

// reclaimAll reclaims dirs, a few at a time, as calls of the session: Close
// waits for them, and none starts after the session ended.
func (s *Store) reclaimAll(dirs []string) {
	if s.begin() != nil {
		return
	}
	defer s.calls.Done()
	reclaim.Each(dirs, s.reclaim)
}

// dirMark is the data of a directory Create made implicitly: ZooKeeper
// does not tell its clients which nodes are containers (a container's
// Stat reads as a persistent node's), so the Store marks its own. Get
// shows such a directory with no data, as any parent Create makes; one
// whose data someone Set is theirs, and no longer removed.
var dirMark = []byte("\x00corral:dir")

// dirKind is what a Store knows of a directory.
type dirKind uint8

const (
	dirUnknown  dirKind = iota
	dirOurs             // made by Create (a container holding dirMark, version 0)
	dirExplicit         // made explicitly: never removed
	dirRemoved          // removed by this Store, as the last one out of it
)

// maxDirs bounds what dirs remembers: a Store that has seen more
// directories forgets them all and learns again (one read per directory).
const maxDirs = 4096

// dirs is what a Store knows of the directories it made or read.
type dirs struct {
	mu sync.Mutex
	m  map[string]dirKind
}

func (d *dirs) get(p string) dirKind {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[p]
}

func (d *dirs) set(p string, k dirKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if k == dirUnknown {
		delete(d.m, p)
		return
	}
	if d.m == nil || len(d.m) >= maxDirs {
		d.m = make(map[string]dirKind)
	}
	d.m[p] = k
}

// makeDir creates the directory p as Create makes one, and notes it as
// this Store's.
func (s *Store) makeDir(p string) error {
	err := s.conn.CreateContainer(p, dirMark, s.acl)
	if err == nil {
		s.dirs.set(p, dirOurs)
	}
	return err
}

// makeAhead sends the create of the directory p, which this Store removed
// itself (dirRemoved), and returns once the request is on the wire, so
// that a create in p sent next finds it made; wait returns its outcome,
// and must be called. A create that overtakes it anyway fails with
// ErrNoNode and makes p as usual (makeParents).
func (s *Store) makeAhead(p string) (wait func()) {
	written, stop := s.wires.expect(string(containerTag(s.conn.abs(p))))
	done := make(chan struct{})
	s.goRun(fn(func() {
		defer close(done)
		_ = s.makeDir(p) // ErrNodeExists: made by another; ErrNoNode: by makeParents
	}))
	select {
	case <-written:
	case <-done:
	}
	stop()
	return func() { <-done }
}

// learn notes what a listing of the directory p read of it, right after a
// create in it: dataLen and version are its Stat's. Data other than
// dirMark, or a version set since, is a directory made explicitly.
func (s *Store) learn(p string, dataLen, version int32) {
	if dataLen != int32(len(dirMark)) || version != 0 {
		s.dirs.set(p, dirExplicit)
	}
}

// plainDelete reports whether deleteNode deletes path alone and tells the
// reclaimer later, without blocking: a node of the root, or any node with a
// reclaim delay (Delete sends those as direct requests; see direct.go).
func (s *Store) plainDelete(path string) bool {
	return store.Parent(path) == "/" || s.later.Delay > 0
}

// deleteNode deletes the node at path, and its directory when it was the
// last node there (s.later). With no reclaim delay and a directory this
// Store knows as its own, the directory's delete goes out right behind the
// node's; other directories are examined after the node's delete.
func (s *Store) deleteNode(path string) error {
	dir := store.Parent(path)
	if s.plainDelete(path) || s.dirs.get(dir) != dirOurs {
		err := s.conn.Delete(path, -1)
		if err == nil && dir != "/" {
			s.later.Emptied(dir)
		}
		return err
	}
	written, stop := s.wires.expect(string(deleteTag(s.conn.abs(path))))
	done := make(chan error, 1)
	s.goRun(fn(func() { done <- s.conn.Delete(path, -1) }))
	var err error
	select {
	case <-written:
		stop()
		derr := s.conn.Delete(dir, 0)
		err = <-done
		s.reclaimed(dir, derr)
	case err = <-done:
		stop()
		if err == nil {
			s.later.Emptied(dir)
		}
	}
	return err
}

// reclaimed notes the outcome err of the delete of the directory p, one of
// this Store's, and goes on to the directory above it once p is gone.
func (s *Store) reclaimed(p string, err error) {
	switch {
	case err == nil:
		s.dirs.set(p, dirRemoved)
		s.reclaim(store.Parent(p))
	case errors.Is(err, zk.ErrNotEmpty):
	default:
		s.dirs.set(p, dirUnknown) // changed, removed by another, or unknown
		s.reclaimFailed(p, err)
	}
}

// reclaimFailed hands p back to the reclaimer when err, the error of a
// request of its removal, may pass (the connection was lost): the server
// reaps a container that had a child, but not one that never had one (a
// directory a create made and then made nothing in), unless it is set to
// (see reclaim.Later.Again).
func (s *Store) reclaimFailed(p string, err error) {
	if isConnErr(err) && !errors.Is(err, zk.ErrClosing) {
		s.later.Again(p)
	}
}

// reclaim removes the directory at p, and each above it in turn, while it
// is empty and Create made it (it holds dirMark): the last one out of a
// directory takes it along at once, so that the server's reaper (at most
// znode.container.maxPerMinute every checkIntervalMs) has only the
// directories emptied by a session's end to catch. A contender that
// creates in the directory meanwhile makes the delete fail harmlessly
// (ErrNotEmpty), or finds the directory gone and makes it again (see
// create); the delete is conditional on the version read, so a directory
// whose data was set since is kept. A request cut short by a lost
// connection hands its directory back to be tried again (reclaimFailed);
// other errors stop the walk.
//
// A directory known to be explicit stops the walk with no request; one
// known as this Store's is deleted with no read first. The server's reaper
// may remove a directory first: one found gone is passed over, and the
// one above it checked in turn.
func (s *Store) reclaim(p string) {
	for ; p != "/"; p = store.Parent(p) {
		switch s.dirs.get(p) {
		case dirExplicit:
			return
		case dirOurs:
			err := s.conn.Delete(p, 0)
			s.reclaimed(p, err)
			if err == nil || errors.Is(err, zk.ErrNotEmpty) {
				return // reclaimed went on from p's parent
			}
		}
		data, st, err := s.conn.Get(p)
		switch {
		case errors.Is(err, zk.ErrNoNode):
			continue
		case err != nil:
			s.reclaimFailed(p, err)
			return
		case !bytes.Equal(data, dirMark) || st.Version != 0:
			s.dirs.set(p, dirExplicit)
			return
		case st.NumChildren > 0:
			s.dirs.set(p, dirOurs) // the next delete in it goes the short way
			return
		}
		if err := s.conn.Delete(p, 0); err != nil && !errors.Is(err, zk.ErrNoNode) {
			s.reclaimFailed(p, err)
			return
		}
		s.dirs.set(p, dirRemoved)
	}
}

// deleteTag is what the frame of a delete of the server's path abs, of
// any version, holds (opcode, path, version -1): a frame that holds it is
// that request (see wires).
func deleteTag(abs string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 2) // opDelete
	b = binary.BigEndian.AppendUint32(b, uint32(len(abs)))
	b = append(b, abs...)
	return binary.BigEndian.AppendUint32(b, 0xffffffff)
}

// containerTag is what the frame of makeDir's create of the server's path
// abs holds (opcode, path, dirMark).
func containerTag(abs string) []byte {
	b := binary.BigEndian.AppendUint32(nil, 19) // opCreateContainer
	b = binary.BigEndian.AppendUint32(b, uint32(len(abs)))
	b = append(b, abs...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(dirMark)))
	return append(b, dirMark...)
}
