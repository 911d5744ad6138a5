package cache

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/corral-go/corral/store"
)

// node is a node as a cache keeps it: never changed once kept, so that
// snapshots share it.
type node = store.Node

// Snapshot is a Tree's view of its subtree at one moment: path to node.
// It is immutable and safe for concurrent use, and what its methods return
// is the caller's own. The zero Snapshot is empty, of no path.
type Snapshot struct {
	path  string
	m     pmap
	stale bool
}

// Path returns the path of the Tree the snapshot is of.
func (s Snapshot) Path() string { return s.path }

// Len returns the number of nodes.
func (s Snapshot) Len() int { return s.m.len() }

// Stale reports whether the view may be out of date: the store's
// connection is lost, or its changes since are being read again.
func (s Snapshot) Stale() bool { return s.stale }

// Get returns the node at path, and whether there is one.
func (s Snapshot) Get(path string) (store.Node, bool) {
	n, ok := s.m.get(path)
	if !ok {
		return store.Node{}, false
	}
	return clone(n), true
}

// Paths returns the paths of the nodes, sorted.
func (s Snapshot) Paths() []string {
	ps := make([]string, 0, s.m.len())
	s.m.each(func(k string, _ *node) bool {
		ps = append(ps, k)
		return true
	})
	slices.Sort(ps)
	return ps
}

// Nodes returns the nodes, sorted by path.
func (s Snapshot) Nodes() []store.Node {
	ns := make([]store.Node, 0, s.m.len())
	s.m.each(func(_ string, n *node) bool {
		ns = append(ns, clone(n))
		return true
	})
	slices.SortFunc(ns, func(a, b store.Node) int { return strings.Compare(a.Path, b.Path) })
	return ns
}

func (s Snapshot) String() string {
	stale := ""
	if s.stale {
		stale = ", stale"
	}
	return fmt.Sprintf("snapshot of %s: %d nodes%s", s.path, s.m.len(), stale)
}

// clone returns a copy of n that shares no data with it.
func clone(n *node) store.Node {
	c := *n
	c.Data = bytes.Clone(n.Data)
	return c
}

// same reports whether two reads of a path found the same node in the
// same state (the marker of staleness has no node: nil).
func same(a, b *node) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Seq == b.Seq && a.Version == b.Version && a.Owner == b.Owner &&
		a.Created.Equal(b.Created) && bytes.Equal(a.Data, b.Data)
}

// EventType says what an Event tells.
type EventType int

const (
	// Created: a node the receiver did not have.
	Created EventType = iota + 1
	// Changed: a node the receiver had, in another state (its data, its
	// version; or a node deleted and made again since, see the package
	// doc).
	Changed
	// Deleted: a node the receiver had is gone.
	Deleted
	// Stale: the view may be out of date from here on: the connection
	// is lost, or the changes since are being read again.
	Stale
	// Current: the view is current again: every change made before this
	// event has been delivered before it. A Tree sends one too once its
	// first read is delivered.
	Current
)

func (t EventType) String() string {
	switch t {
	case Created:
		return "created"
	case Changed:
		return "changed"
	case Deleted:
		return "deleted"
	case Stale:
		return "stale"
	case Current:
		return "current"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change of a Tree, as its receiver takes it.
type Event struct {
	Type EventType
	// Path is the node's path; "" for Stale and Current.
	Path string
	// Node is the node now (Created, Changed).
	Node store.Node
	// Old is the node as the receiver last had it (Changed, Deleted).
	Old store.Node
}

func (e Event) String() string {
	switch e.Type {
	case Created:
		return fmt.Sprintf("created %s (version %d, %d bytes)", e.Path, e.Node.Version, len(e.Node.Data))
	case Changed:
		return fmt.Sprintf("changed %s (version %d, %d bytes)", e.Path, e.Node.Version, len(e.Node.Data))
	case Deleted:
		return fmt.Sprintf("deleted %s", e.Path)
	}
	return e.Type.String()
}
