package etcdstore

import (
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ops keeps the parts of a create that depend on its parent (and listing
// window) alone, and the compare of the create fence, built once: building
// one costs the client as many allocations as sending it. An Op or a Cmp is
// a value that sending only reads (a chroot prefixes a copy), so one is
// shared by every create under the parent. It forgets all once it holds
// maxOps.
type ops struct {
	mu      sync.Mutex
	windows map[opKey]clientv3.Op
	dirs    map[string]*dirOps
	// fenceAt is the compare that the fence is at fenceRev.
	fenceAt  clientv3.Cmp
	fenceRev int64
}

// opKey names a cached window read: that of window children of p.
type opKey struct {
	p      string
	window int
}

// dirOps are the parts of a create that depend on its parent alone.
type dirOps struct {
	exists, noLease clientv3.Cmp // the parent exists, attached to no lease
	get             clientv3.Op  // its key-only read
	// rev is the parent's CreateRevision as last read with no lease
	// attached, 0 while unknown; at compares it. Under ops.mu.
	rev int64
	at  clientv3.Cmp
}

const maxOps = 1024

// window returns the read of the window of k.window children of k.p.
func (c *ops) window(k opKey) clientv3.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	if op, ok := c.windows[k]; ok {
		return op
	}
	key, opts := windowRange(k.p, 0, k.window)
	op := clientv3.OpGet(key, opts...)
	if c.windows == nil || len(c.windows) >= maxOps {
		c.windows = make(map[opKey]clientv3.Op)
	}
	c.windows[k] = op
	return op
}

// dir returns the parts of a create under parent p.
func (c *ops) dir(p string) *dirOps {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.dirs[p]; ok {
		return d
	}
	d := &dirOps{
		exists:  clientv3.Compare(clientv3.CreateRevision(p), ">", 0),
		noLease: clientv3.Compare(clientv3.LeaseValue(p), "=", 0),
		get:     clientv3.OpGet(p, clientv3.WithKeysOnly()),
	}
	if c.dirs == nil || len(c.dirs) >= maxOps {
		c.dirs = make(map[string]*dirOps)
	}
	c.dirs[p] = d
	return d
}

// parent returns the parts of a create under p, and rev, the parent's
// CreateRevision as a create last read it with no lease (0 while unknown),
// with at, the compare that the parent is the key made then (see
// parentCmps).
func (c *ops) parent(p string) (d *dirOps, at clientv3.Cmp, rev int64) {
	d = c.dir(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	return d, d.at, d.rev
}

// learnParent records what a read of the parent p found (kvs): its
// CreateRevision when it has no lease, else that it is unknown.
func (c *ops) learnParent(p string, kvs []*mvccpb.KeyValue) {
	d := c.dir(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case len(kvs) == 0 || kvs[0].Lease != 0:
		d.rev = 0
	case kvs[0].CreateRevision != d.rev:
		d.rev, d.at = kvs[0].CreateRevision, clientv3.Compare(clientv3.CreateRevision(p), "=", kvs[0].CreateRevision)
	}
}

// parentCmps appends to cmps the compares of a create under p (below the
// root) that its parent exists with no lease attached, and returns the
// parent's CreateRevision they require, 0 for none. Once a create has read
// the parent's CreateRevision (where rev is 0, its transaction reads the
// parent too, and learnParent records it), that is one compare, that the
// parent is the key made then, where it is two (it exists, it has no
// lease): one range fewer for the server to decode twice (request and
// log) and look up, on every create. The one compare holds what the two
// do, for a key's lease changes only when the key is made again (a Store
// makes keys only where none is, and Set keeps the lease); a parent made
// again since fails it, and the read after that refusal (see createReq)
// learns the new one.
func (s *Store) parentCmps(cmps []clientv3.Cmp, p string) ([]clientv3.Cmp, int64) {
	d, at, rev := s.ops.parent(p)
	if rev != 0 {
		return append(cmps, at), rev
	}
	return append(cmps, d.exists, d.noLease), 0
}

// fence returns the compare that the fence key's ModRevision is rev: the
// same until the fence moves.
func (c *ops) fence(key string, rev int64) clientv3.Cmp {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fenceAt.Key == nil || c.fenceRev != rev {
		c.fenceAt, c.fenceRev = clientv3.Compare(clientv3.ModRevision(key), "=", rev), rev
	}
	return c.fenceAt
}
