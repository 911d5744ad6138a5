package recipe

import (
	"context"
	"errors"
	"slices"

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
// member's value when it first lists it and, once FollowValues was called,
// again after each change of it; it remembers only the nodes of its last
// listing. A Members is the state of one follower: it is not safe for
// concurrent use.
type Members struct {
	st     store.Store
	dir    string
	family names.Family
	also   names.Family     // read too, in a directory that holds them
	known  map[string]known // by path: the members of the last read
	dirs   map[string]int64 // by path: the Seq of the directories of the last read
	values context.Context  // FollowValues' ctx; nil: values are read once
	skip   bool             // leave out another recipe's nodes (SkipOthers)
}

// known is a member of the last read, with the watch of its node when
// values are followed (nil otherwise).
type known struct {
	Member
	changed <-chan store.Event
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

// SkipOthers makes m leave out a node of another recipe rather than fail
// the read with ErrKindMismatch: for the members' own follower, whose
// directory was checked when they joined, and which a stray node (a
// refused join's, made and removed at once) must not stop. Such a node is
// no member.
func (m *Members) SkipOthers() { m.skip = true }

// FollowValues makes m watch each member's node for as long as ctx lives
// (the follower's life, not one read's), so that a change of a member's
// value fires the watches ReadAll returns, as a member that joins or goes
// does. A member's watch is set when it is first listed, and again only
// after it fired: the watches stay one per member, and each fires at the
// latest when its member goes.
func (m *Members) FollowValues(ctx context.Context) { m.values = ctx }

// Read returns the members now, in the order they joined (by Seq), with a
// watch set on ctx that fires when they may have changed. A directory that
// does not exist has none, and the watch fires when it is made. A member
// that went between the listing and the read of its value is left out: the
// watch fires for it. A node of another recipe fails the read with
// ErrKindMismatch, unless SkipOthers was called. The watch does not fire for a change of a member's
// value: ReadAll's do, once FollowValues was called.
func (m *Members) Read(ctx context.Context) ([]Member, <-chan store.Event, error) {
	ms, stale, err := m.ReadAll(ctx)
	if err != nil {
		return nil, nil, err
	}
	return ms, stale[0], nil
}

// ReadAll is Read with every watch that fires when the members may have
// changed: the directory's first, then, once FollowValues was called, one
// per member whose value may change.
func (m *Members) ReadAll(ctx context.Context) ([]Member, []<-chan store.Event, error) {
	kids, ch, err := WatchChildren(ctx, m.st, m.dir)
	if err != nil {
		return nil, nil, err
	}
	want := m.want(kids)
	if m.skip {
		kids = slices.DeleteFunc(kids, func(k store.Child) bool {
			return checkFamily(m.dir, k.Name, names.FamilyOf(k.Name), want) != nil
		})
	} else if err := CheckFamily(m.dir, kids, want); err != nil {
		return nil, nil, err
	}
	stale := []<-chan store.Event{ch}
	ms := make([]Member, 0, len(kids))
	now := make(map[string]known, len(kids))
	dirs := make(map[string]int64)
	for _, k := range kids {
		p := store.Join(m.dir, k.Name)
		if mb, ok := m.known[p]; ok && mb.Seq == k.Seq && !fired(mb.changed) {
			ms = append(ms, mb.Member)
			now[p] = mb
			if mb.changed != nil {
				stale = append(stale, mb.changed)
			}
			continue
		}
		if seq, ok := m.dirs[p]; ok && seq == k.Seq {
			dirs[p] = seq
			continue
		}
		mb, dir, err := m.read(ctx, p, k.Seq)
		switch {
		case err != nil:
			return nil, nil, err
		case dir:
			dirs[p] = k.Seq
			continue
		case mb.Path == "":
			continue // gone: the directory's watch fires for it
		}
		ms = append(ms, mb.Member)
		now[p] = mb
		if mb.changed != nil {
			stale = append(stale, mb.changed)
		}
	}
	m.known, m.dirs = now, dirs // only the nodes listed now: nothing grows
	return ms, stale, nil
}

// read reads the node at p, listed with Seq seq: a member (with the watch
// of its value, when values are followed), a directory (dir), or gone (the
// zero known).
func (m *Members) read(ctx context.Context, p string, seq int64) (mb known, dir bool, err error) {
	n, err := m.st.Get(ctx, p)
	if errors.Is(err, store.ErrNoNode) || err == nil && n.Seq != seq {
		return known{}, false, nil
	}
	if err != nil {
		return known{}, false, err
	}
	if n.Owner == 0 {
		return known{}, true, nil
	}
	if m.values != nil {
		// The watch is set after the read that told a member from a
		// directory: a change between the two shows as a newer version,
		// and the value is read again.
		stat, ch, err := store.WatchNode(m.values, m.st, p)
		if errors.Is(err, store.ErrNoNode) || err == nil && stat.Seq != seq {
			return known{}, false, nil
		}
		if err != nil {
			return known{}, false, err
		}
		if stat.Version != n.Version {
			if n, err = m.st.Get(ctx, p); errors.Is(err, store.ErrNoNode) || err == nil && n.Seq != seq {
				return known{}, false, nil
			}
			if err != nil {
				return known{}, false, err
			}
		}
		mb.changed = ch
	}
	mb.Member = Member{Path: p, Value: n.Data, Token: n.Fence(), Seq: n.Seq}
	return mb, false, nil
}

// fired reports whether the watch ch has fired (or can no longer fire):
// a nil ch never does.
func fired(ch <-chan store.Event) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
