package recipe

import (
	"context"
	"errors"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// Member is one member of a directory of members (a group's, a
// partition's), as a read of it found it.
type Member struct {
	// Path is the member's node.
	Path string
	// Value is the node's data.
	Value []byte
	// Token is the node's fencing token (store.Node.Fence).
	Token int64
	// Seq is the node's Seq, which tells it from a node of the same name
	// made since.
	Seq int64
}

// Members reads the members of a directory: the nodes of a session
// (ephemeral) that the directory holds, of the family its members have or
// none (another client's members, as Curator's GroupMember writes them); a
// persistent node there is no member but a directory below it. It reads a
// member's value once, when it first lists it, and remembers only the nodes
// of its last listing. A Members is the state of one follower: it is not
// safe for concurrent use.
type Members struct {
	st     store.Store
	dir    string
	family names.Family
	also   names.Family      // read too, in a directory that holds them
	known  map[string]Member // by path: the members of the last read
	dirs   map[string]int64  // by path: the Seq of the directories of the last read
}

// NewMembers returns the reader of the members of family f in dir, or of
// family also where dir holds members of that family (a group's watcher
// reads a partition's members too); also may be names.NoFamily.
func NewMembers(st store.Store, dir string, f, also names.Family) *Members {
	return &Members{st: st, dir: dir, family: f, also: also}
}

// want returns the family of the members of kids: m.also where one of
// kids is of that family, else m.family.
func (m *Members) want(kids []store.Child) names.Family {
	if m.also != names.NoFamily {
		for _, k := range kids {
			if names.FamilyOf(k.Name) == m.also {
				return m.also
			}
		}
	}
	return m.family
}

// Read returns the members now, in the order they joined (by Seq), with a
// watch set on ctx that fires when they may have changed. A directory that
// does not exist has none, and the watch fires when it is made. A member
// that went between the listing and the read of its value is left out: the
// watch fires for it. A node of another recipe fails the read with
// ErrKindMismatch.
func (m *Members) Read(ctx context.Context) ([]Member, <-chan store.Event, error) {
	kids, ch, err := WatchChildren(ctx, m.st, m.dir)
	if err == nil {
		err = CheckFamily(m.dir, kids, m.want(kids))
	}
	if err != nil {
		return nil, nil, err
	}
	ms := make([]Member, 0, len(kids))
	known := make(map[string]Member, len(kids))
	dirs := make(map[string]int64)
	for _, k := range kids {
		p := store.Join(m.dir, k.Name)
		if mb, ok := m.known[p]; ok && mb.Seq == k.Seq {
			ms = append(ms, mb)
			known[p] = mb
			continue
		}
		if seq, ok := m.dirs[p]; ok && seq == k.Seq {
			dirs[p] = seq
			continue
		}
		n, err := m.st.Get(ctx, p)
		if errors.Is(err, store.ErrNoNode) || err == nil && n.Seq != k.Seq {
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		if n.Owner == 0 {
			dirs[p] = n.Seq
			continue
		}
		mb := Member{Path: p, Value: n.Data, Token: n.Fence(), Seq: n.Seq}
		ms = append(ms, mb)
		known[p] = mb
	}
	m.known, m.dirs = known, dirs // only the nodes listed now: nothing grows
	return ms, ch, nil
}
