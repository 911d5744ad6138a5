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
		return fmt.Errorf("%w: %q holds %q (a %v), not a %v", ErrKindMismatch, dir, name, f, want)
	}
	return nil
}
