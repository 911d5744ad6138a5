package recipe

import (
	"errors"
	"fmt"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// ErrKindMismatch: a recipe found, in its directory, the nodes of another
// kind of recipe (a Mutex where a Semaphore holds its leases, say). The two
// would not exclude each other, so the call refuses instead. The sync,
// election and queue packages export it under their own names.
var ErrKindMismatch = errors.New("path holds the nodes of another kind of recipe")

// ErrMismatch: a recipe's setting (a semaphore's limit, a striped lock's
// number of stripes, a double barrier's number of participants, a
// partition's number of shards, a queue's settings) differs from the one
// that those already using the recipe's path agreed on. The call is
// refused and leaves no node behind; the others are not disturbed. The
// sync, partition and queue packages export it as their ErrMismatch.
var ErrMismatch = errors.New("settings differ from those in use")

// A Setting is a value every contender of a directory must agree on. It
// lives in the contenders' names (names.WithSetting), so it lives as long
// as they do: a directory whose last contender went holds no setting, and
// the next contender sets it anew. A contender agrees when every contender
// created before it that records the setting records the same value
// (Agree): comparing with all of them, not only the oldest, means that two
// contenders with different values are never both admitted, however their
// creates interleave (a contender may be refused while a mismatched one
// before it is still being refused).
type Setting struct {
	// Marker is the marker of the contenders' names, Key the setting's key
	// after it (names.WithSetting).
	Marker string
	Key    byte
	// Value is the caller's.
	Value int
	// Name says what the setting is, for errors ("limit", "shards").
	Name string
}

// Prefix returns the name prefix of a contender that records s.
func (s *Setting) Prefix() string { return names.WithSetting(s.Marker, s.Key, s.Value) }

// Agree returns nil when every contender of cs before the one at own (cs
// is ordered by Seq) that records s records s.Value, and an error wrapping
// ErrMismatch otherwise.
func (s *Setting) Agree(dir string, cs []Contender, own int) error {
	for _, c := range cs[:own] {
		if err := s.Check(dir, c.Name); err != nil {
			return err
		}
	}
	return nil
}

// Check returns an error wrapping ErrMismatch if the node named name in
// dir records s with another value.
func (s *Setting) Check(dir, name string) error {
	if v, ok := names.SettingOf(name, s.Marker, s.Key); ok && v != s.Value {
		return fmt.Errorf("%w: %s %d here, %d in %q", ErrMismatch, s.Name, s.Value, v, store.ShortPath(store.Join(dir, name)))
	}
	return nil
}

// CheckFamily returns an error wrapping ErrKindMismatch if kids, the
// children of dir, hold a node of a family other than want, as
// names.FamilyOf tells it (foreign contenders are welcome beside locks,
// latches and group members: another client's group member, as Curator's
// GroupMember or kazoo's Party write them, has no marker of ours).
func CheckFamily(dir string, kids []store.Child, want names.Family) error {
	for _, k := range kids {
		if err := checkFamily(dir, k.Name, names.FamilyOf(k.Name), want); err != nil {
			return err
		}
	}
	return nil
}

// checkFamily is CheckFamily of the child name of dir, of family f.
func checkFamily(dir, name string, f, want names.Family) error {
	switch {
	case f == want, f == names.NoFamily:
	case f == names.Foreign && (want == names.Locks || want == names.Latches || want == names.Groups):
	default:
		return fmt.Errorf("%w: %q holds %q (a %v), not a %v", ErrKindMismatch, store.ShortPath(dir), store.ShortPath(name), f, want)
	}
	return nil
}
