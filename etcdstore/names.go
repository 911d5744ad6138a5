package etcdstore

import (
	"math/rand/v2"
	"strings"
	gosync "sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcd keeps every key that was ever written in its index, deleted ones
// too, until the cluster is compacted, and a range read walks all of them.
// A recipe that named every contender anew would make each acquisition of a
// lock dearer than the one before, until the next compaction (measured:
// 726 → 244 cycles/s over 50,000 cycles of one session). So a session uses
// the names of its ephemeral sequential nodes again, as etcd's own
// concurrency.Mutex uses one key per session: a name whose node this
// session deleted with DeleteSeq is the name of its next ephemeral
// sequential node under the same requested path. The names a directory
// holds are then bounded by the sessions that use it and how many nodes
// each holds at once, and so is the cost of reading it.
//
// Only DeleteSeq frees a name: it deletes the node only if it is the one
// with the Seq it names, so a late or repeated delete meant for an old node
// never removes the new node at its name (a recipe's cleanup may retry a
// delete long after it was first sent). A name deleted with Delete, or
// whose create failed or was abandoned, is never used again.

// names is a session's pool of ephemeral sequential names.
type names struct {
	mu    gosync.Mutex
	live  map[string]liveName  // a name → the node this session made there
	free  map[string]freeNames // a requested path → names free for it
	nfree int
}

// liveName is the requested path and the Seq of a node this session made,
// and the operations on its name once built.
type liveName struct {
	path string
	seq  int64
	ops  *nameOps
}

// freeName is a name free for use again, with its operations once built.
type freeName struct {
	name string
	ops  *nameOps
}

// freeNames are the names free for one requested path: the first kept in
// the map's value itself, as a session most often has one name per path
// (a lock's contender, taken and given back on every cycle), for which a
// slice would be made anew every time.
type freeNames struct {
	one  freeName // set whenever more is not empty
	more []freeName
}

// nameOps are the parts of a create's and a delete's transactions that
// depend on a reused name alone (and the session's lease), built at the
// name's first DeleteSeq and kept with the name: building one costs the
// client as many allocations as sending it. An Op or a Cmp is a value that
// sending only reads (a chroot prefixes a copy), so one is shared by every
// use of the name.
type nameOps struct {
	absent clientv3.Cmp  // no node at the name
	get    clientv3.Op   // the node's read (after a create's refusal)
	put    clientv3.Op   // its put with the session's lease, data left out
	seq    clientv3.Cmp  // CreateRevision(name), to compare with a Seq
	leaf   clientv3.Cmp  // no node below the name
	del    []clientv3.Op // the node's delete alone
	keys   clientv3.Op   // the node's key-only read (a delete's Else branch)

	// The compares of the name's create under its parent (below the
	// root) with the fence at fence and the parent's CreateRevision
	// known as rev (see parentCmps), built again when either moves: a
	// name has one create in flight at a time (the one that took it
	// from the pool), and the slice is replaced, never written to, as a
	// create in flight may read it.
	parent     string
	fence, rev int64
	cmps       []clientv3.Cmp
}

// guards returns the compares of a create of the name under parent, below
// the root, with the fence at fence (see createReq), and the parent's
// CreateRevision they require, 0 for none (see parentCmps).
func (o *nameOps) guards(s *Store, parent string, fence int64) ([]clientv3.Cmp, int64) {
	if _, _, rev := s.ops.parent(parent); o.cmps == nil || o.parent != parent || o.fence != fence || o.rev != rev {
		cmps := make([]clientv3.Cmp, 2, 4)
		cmps[0], cmps[1] = o.absent, s.ops.fence(s.fenceKey, fence)
		o.cmps, o.rev = s.parentCmps(cmps, parent)
		o.parent, o.fence = parent, fence
	}
	return o.cmps, o.rev
}

func newNameOps(name string, lease clientv3.LeaseID) *nameOps {
	del := clientv3.OpDelete(name)
	return &nameOps{
		absent: clientv3.Compare(clientv3.CreateRevision(name), "=", 0),
		get:    clientv3.OpGet(name),
		put:    clientv3.OpPut(name, "", clientv3.WithLease(lease)),
		seq:    clientv3.CreateRevision(name),
		leaf:   clientv3.Compare(clientv3.CreateRevision(name+"/"), "=", 0).WithPrefix(),
		del:    []clientv3.Op{del},
		keys:   clientv3.OpGet(name, clientv3.WithKeysOnly()),
	}
}

// The pool's bounds: past them names are dropped, which only costs their
// reuse.
const (
	maxLiveNames = 1 << 14
	maxFreeNames = 1 << 10
)

// newName returns a name for an ephemeral sequential node requested at p:
// a free one when there is one (reused reports it), with its operations
// if built, else p followed by 16 random hexadecimal digits.
func (ns *names) newName(p string) (name string, ops *nameOps, reused bool) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	fs, ok := ns.free[p]
	if !ok {
		return freshName(p), nil, false
	}
	f := fs.one
	if n := len(fs.more); n > 0 {
		f, fs.more = fs.more[n-1], fs.more[:n-1]
		ns.free[p] = fs
	} else {
		delete(ns.free, p)
	}
	ns.nfree--
	return f.name, f.ops, true
}

func freshName(p string) string { return freshChild("", p) }

// freshChild is freshName(store.Join(parent, name)) with one allocation, for
// a batch's nodes; parent "" stands for none.
func freshChild(parent, name string) string {
	// By hand, not fmt.Sprintf: one allocation where Sprintf makes three,
	// on every create of a sequential node.
	const digits = "0123456789abcdef"
	v := rand.Uint64()
	var b strings.Builder
	b.Grow(len(parent) + 1 + len(name) + 16)
	if parent != "" {
		b.WriteString(parent)
		if parent != "/" {
			b.WriteByte('/')
		}
	}
	b.WriteString(name)
	for shift := 60; shift >= 0; shift -= 4 {
		b.WriteByte(digits[v>>shift&0xf])
	}
	return b.String()
}

// made records that this session made the node with seq at name, requested
// at p; ops are the name's operations, or nil.
func (ns *names) made(name, p string, seq int64, ops *nameOps) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.live == nil {
		ns.live = map[string]liveName{}
	}
	if len(ns.live) >= maxLiveNames {
		for k := range ns.live { // nodes deleted by others, most likely
			delete(ns.live, k)
			break
		}
	}
	ns.live[name] = liveName{path: p, seq: seq, ops: ops}
}

// liveOps returns the operations of name, built now if need be, when the
// node with seq at name is one this session made (and has not seen
// deleted); else nil.
func (ns *names) liveOps(name string, seq int64, lease clientv3.LeaseID) *nameOps {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	l, ok := ns.live[name]
	if !ok || l.seq != seq {
		return nil
	}
	if l.ops == nil {
		l.ops = newNameOps(name, lease)
		ns.live[name] = l
	}
	return l.ops
}

// deleted records that the node with seq at name is gone (DeleteSeq
// deleted it or found it gone): its name is free if this session made it.
func (ns *names) deleted(name string, seq int64) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	l, ok := ns.live[name]
	if !ok || l.seq != seq {
		return
	}
	delete(ns.live, name)
	if ns.nfree >= maxFreeNames {
		return
	}
	if ns.free == nil {
		ns.free = map[string]freeNames{}
	}
	f := freeName{name, l.ops}
	if fs, ok := ns.free[l.path]; ok {
		fs.more = append(fs.more, f)
		ns.free[l.path] = fs
	} else {
		ns.free[l.path] = freeNames{one: f}
	}
	ns.nfree++
}

// forget drops name for good: it was deleted with Delete, which cannot tell
// which node it deleted.
func (ns *names) forget(name string) {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	delete(ns.live, name)
}
