package store

// Guard names the node a guarded write requires: the node at Path whose
// Seq is Seq (see Identity in the package doc: a node found at Path with
// another Seq is another node, and does not satisfy the guard). Every hold
// of corral's primitives (a lock, a read hold, a lease, a leadership, a
// shard, a membership) offers its own through a Guard method: a write
// guarded by it is applied, decided by the server in the same atomic step,
// only while the hold's node exists, which is while the hold is held at
// the server.
//
// The zero Guard names no node: it is what a Guard method returns when
// nothing is held.
type Guard struct {
	Path string
	Seq  int64
}

// IsZero reports whether g is the zero Guard, which names no node.
func (g Guard) IsZero() bool { return g == Guard{} }
