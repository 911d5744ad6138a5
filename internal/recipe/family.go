package recipe

import (
	"errors"
	"fmt"
	"strings"

	"github.com/corral-go/corral/store"
)

// ErrKindMismatch: a recipe found, in its directory, the nodes of another
// kind of recipe (a Mutex where a Semaphore holds its leases, say). The two
// would not exclude each other, so the call refuses instead. The sync,
// election and queue packages export it under their own names.
var ErrKindMismatch = errors.New("path holds the nodes of another kind of recipe")

// Family is the kind of recipe a node in a recipe's directory belongs to,
// as its name tells.
type Family uint8

const (
	// NoFamily: a name no recipe makes; it is ignored.
	NoFamily Family = iota
	// Locks: mutex and shared-lock contenders (LockPrefix, ReadPrefix,
	// WritePrefix, kazoo's markers).
	Locks
	// Latches: election candidates (LatchPrefix).
	Latches
	// Leases: semaphore leases.
	Leases
	// Members: double barrier participants and the barrier's ready node.
	Members
	// Queues: a queue's items, claims and deliveries directories and its
	// config node.
	Queues
	// Foreign: another client's contender with no marker (a bare 10-digit
	// suffix, an etcd lease key): a lock or an election may share it.
	Foreign
	// Groups: group members (GroupPrefix).
	Groups
)

// The names that mark a family, besides the lock and latch prefixes.
const (
	leaseMarker  = "lease-"
	memberMarker = "member-"
	readyName    = "ready"
	itemsName    = "items"
	claimsName   = "claims"
	configName   = "config"
	countsName   = "deliveries"
)

// GroupPrefix names the nodes of group members.
const GroupPrefix = "group-"

// FamilyOf returns the family of the node named name (or of the nodes made
// with name as their prefix).
func FamilyOf(name string) Family {
	switch name {
	case readyName:
		return Members
	case itemsName, claimsName, configName, countsName:
		return Queues
	}
	switch {
	case strings.Contains(name, LatchPrefix):
		return Latches
	case strings.Contains(name, leaseMarker):
		return Leases
	case strings.Contains(name, GroupPrefix):
		return Groups
	case strings.Contains(name, memberMarker):
		return Members
	case strings.Contains(name, LockPrefix), strings.Contains(name, ReadPrefix), strings.Contains(name, WritePrefix),
		strings.Contains(name, kazooLockMarker), strings.Contains(name, kazooReadMarker):
		return Locks
	}
	if _, ok := Parse(name); ok {
		return Foreign
	}
	return NoFamily
}

// CheckFamily returns an error wrapping ErrKindMismatch if kids, the
// children of dir, hold a node of a family other than want (foreign
// contenders are welcome beside locks, latches and group members: another
// client's group member, as Curator's GroupMember or kazoo's Party write
// them, has no marker of ours).
func CheckFamily(dir string, kids []store.Child, want Family) error {
	for _, k := range kids {
		f := FamilyOf(k.Name)
		switch {
		case f == want, f == NoFamily:
		case f == Foreign && (want == Locks || want == Latches || want == Groups):
		default:
			return fmt.Errorf("%w: %q holds %q (a %v), not a %v", ErrKindMismatch, dir, k.Name, f, want)
		}
	}
	return nil
}

func (f Family) String() string {
	switch f {
	case Locks:
		return "lock"
	case Latches:
		return "election"
	case Leases:
		return "semaphore"
	case Members:
		return "double barrier"
	case Queues:
		return "queue"
	case Foreign:
		return "foreign contender"
	case Groups:
		return "group"
	}
	return "node of no recipe"
}
