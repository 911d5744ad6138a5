// Package names is every name corral gives a node on a store, and the
// codec of the names that carry data (a queue item's priority, id, place
// and delivery count). The recipes (sync, election, group, partition,
// queue) write these names, recipe.CheckFamily refuses a directory that
// holds another recipe's, and inspect classifies directories by them: all
// through this package, so that a rename is one edit and inspect cannot
// read a layout the recipes no longer write.
//
// These names are on the wire. Curator, go-zookeeper, kazoo and etcd's
// concurrency package name their contenders the same way on the same paths,
// and corral's processes of an earlier version share directories with
// newer ones: a change here is a change of the layout, never a refactoring.
//
// # Marks
//
// A node's family (the kind of recipe it belongs to) is told by a mark in
// its name: a contender's marker, found anywhere in the name (ZooKeeper
// puts Curator's protected prefix "_c_<uuid>-" in front of it, and the
// store's unique suffix follows it), or a fixed node's whole name. [Marks]
// lists them, and [FamilyOf] reads them. A node with no mark that looks
// like another client's contender (a 10-digit ZooKeeper suffix, an etcd
// lease key) is [Foreign].
package names

import (
	"slices"
	"strconv"
	"strings"

	"github.com/corral-go/corral/store"
)

// The contender markers: a sequential node is named by the store with a
// unique suffix after the marker.
const (
	// Lock marks the nodes of a mutex (Curator's InterProcessMutex,
	// go-zookeeper's zk.Lock), and ends the name of a stripe's contender.
	Lock = "lock-"
	// Read and Write mark the nodes of a shared lock (Curator's
	// InterProcessReadWriteLock).
	Read  = "__READ__"
	Write = "__WRIT__"
	// Latch marks the nodes of an election candidate (Curator's
	// LeaderLatch).
	Latch = "latch-"
	// KazooLock and KazooRead mark kazoo's Lock and its shared ReadLock.
	KazooLock = "__lock__"
	KazooRead = "__rlock__"
	// Lease marks a semaphore's leases (Curator's
	// InterProcessSemaphoreV2).
	Lease = "lease-"
	// Member marks a double barrier's participants.
	Member = "member-"
	// Group marks a group's members.
	Group = "group-"
	// KazooParty marks the members of kazoo's Party, which lists only the
	// children whose name holds it.
	KazooParty = "__party__"
	// GroupMember is the name prefix of a group member's node: the Group
	// marker behind KazooParty, so that kazoo's Party lists corral's
	// members too. A name of an earlier layout ("group-" alone) is a
	// member all the same.
	GroupMember = KazooParty + Group
	// Partition marks a partition's members, which record its number of
	// shards after it (see WithSetting).
	Partition = "partition-"
)

// The fixed nodes of the recipes.
const (
	// Ready is a double barrier's node that records the released round.
	Ready = "ready"
	// Items, Claims and Deliveries are a queue's directories: its items
	// (see [ItemName]), the claims on them by item id, and their delivery
	// counts by item id.
	Items      = "items"
	Claims     = "claims"
	Deliveries = "deliveries"
	// Config is a queue's node that stores its settings; its data starts
	// with ConfigMagic.
	Config = "config"
	// PartitionMembers and PartitionShards are a partition's directories:
	// its members, and the lock directories of its shards.
	PartitionMembers = "members"
	PartitionShards  = "shards"
	// ConfigMagic starts the data of every queue's config node, whatever
	// its version: it tells a queue from a directory that only has a child
	// named "config" (ZooKeeper's own /zookeeper, an application's
	// settings).
	ConfigMagic = "corral queue "
)

// WithSetting returns the name prefix of a contender with marker that also
// records a setting every contender of its directory must agree on (a
// semaphore's limit, a partition's number of shards): the marker, the
// setting's key, its value in decimal and a dash ("lease-" 'n' 3 is
// "lease-n3-"). The store's unique suffix follows it. A setting kept in
// the contenders' names lives exactly as long as they do: a directory with
// none left holds no setting.
func WithSetting(marker string, key byte, v int) string {
	return marker + string(key) + strconv.Itoa(v) + "-"
}

// SettingOf returns the setting key of the contender named name, made with
// marker and WithSetting, and whether it records one (a value of at least
// 1). A name of an earlier layout, or of another client, records none.
func SettingOf(name, marker string, key byte) (int, bool) {
	_, rest, ok := strings.Cut(name, marker)
	if !ok || len(rest) < 3 || rest[0] != key {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest[1:], "-")
	v, err := strconv.Atoi(digits)
	if !ok || err != nil || v < 1 || digits[0] == '+' {
		return 0, false
	}
	return v, true
}

// protected starts Curator's protected names, "_c_<uuid>-".
const protected = "_c_"

// Strip returns name without Curator's protected prefix "_c_<uuid>-", if
// it has one.
func Strip(name string) string {
	const uuidLen = 36
	if !strings.HasPrefix(name, protected) || len(name) < len(protected)+uuidLen+1 || name[len(protected)+uuidLen] != '-' {
		return name
	}
	return name[len(protected)+uuidLen+1:]
}

// Family is the kind of recipe a node in a recipe's directory belongs to,
// as its name tells.
type Family uint8

const (
	// NoFamily: a name no recipe makes; it is ignored.
	NoFamily Family = iota
	// Locks: mutex and shared-lock contenders (Lock, Read, Write, kazoo's
	// markers).
	Locks
	// Latches: election candidates (Latch).
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
	// Groups: group members (Group).
	Groups
	// Partitions: a partition's members (Partition).
	Partitions
	// PartitionDirs: a partition's directories (PartitionMembers,
	// PartitionShards), which its path holds. No recipe lives in such a
	// path but the partition.
	PartitionDirs
)

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
	case Partitions:
		return "partition member"
	case PartitionDirs:
		return "partition"
	}
	return "node of no recipe"
}

// A Mark is a name, or a part of names, that tells the family of the nodes
// that carry it.
type Mark struct {
	Text   string
	Family Family
	// Whole: the mark is a fixed node's whole name; otherwise a
	// contender's marker, found anywhere in the name.
	Whole bool
}

// marks are tried in order and the first that matches wins: the fixed
// names, then the markers. The order only decides a name that carries two
// markers, which corral never writes; it is kept as it was, so that such a
// foreign name keeps the family it had.
var marks = [...]Mark{
	{Ready, Members, true},
	{Items, Queues, true},
	{Claims, Queues, true},
	{Config, Queues, true},
	{Deliveries, Queues, true},
	{PartitionMembers, PartitionDirs, true},
	{PartitionShards, PartitionDirs, true},
	{Latch, Latches, false},
	{Lease, Leases, false},
	{GroupMember, Groups, false},
	{KazooParty, Groups, false},
	{Group, Groups, false},
	{Partition, Partitions, false},
	{Member, Members, false},
	{Lock, Locks, false},
	{Read, Locks, false},
	{Write, Locks, false},
	{KazooLock, Locks, false},
	{KazooRead, Locks, false},
}

// Marks returns every mark, in the order FamilyOf tries them.
func Marks() []Mark { return slices.Clone(marks[:]) }

// FamilyOf returns the family of the node named name (or of the nodes made
// with name as their prefix).
func FamilyOf(name string) Family {
	if f, ok := markedFamily(name); ok {
		return f
	}
	return familyOf(name)
}

// markedFamily is FamilyOf at once for the names a recipe lists most (see
// Marker). It reports false for any other name.
func markedFamily(name string) (Family, bool) {
	m, ok := Marker(name)
	return m.Family, ok
}

// Marker returns the marker of the names a recipe lists most, at every
// check of its directory: a sequential node's, "<marker><10-digit seq>",
// behind Curator's protected prefix "_c_<uuid>-" or not, where the marker
// is one of [Marks]. No marker starts with a hex digit or a dash or holds
// a digit, so none can start in the uuid or reach into the seq: the
// marker is the only one the name holds, and its Family is the name's, as
// [FamilyOf] finds it in the whole name. It reports false for any other
// name.
func Marker(name string) (Mark, bool) {
	rest := Strip(name)
	if len(rest) < len(name) && !hexOrDash(name[len(protected):len(name)-len(rest)-1]) {
		return Mark{}, false
	}
	if _, ok := store.ParseSeq(rest); !ok {
		return Mark{}, false
	}
	marker := rest[:len(rest)-store.SeqDigits]
	for _, m := range markers {
		if m.Text == marker {
			return m, true
		}
	}
	return Mark{}, false
}

// markers holds the markers, each with the family of a name that holds it
// alone, as familyOf tells it. A scan of these few is quicker than a map:
// most differ from the marker sought in length alone.
var markers = func() []Mark {
	var ms []Mark
	for _, mk := range marks {
		if !mk.Whole {
			ms = append(ms, Mark{Text: mk.Text, Family: familyOf(mk.Text)})
		}
	}
	return ms
}()

// hexOrDash reports whether s holds only hex digits and dashes, as a uuid.
func hexOrDash(s string) bool {
	for i := 0; i < len(s); i++ {
		if !uuidByte[s[i]] {
			return false
		}
	}
	return true
}

// uuidByte tells the bytes of a uuid's text: hex digits and dashes.
var uuidByte = func() (t [256]bool) {
	for _, c := range []byte("0123456789abcdefABCDEF-") {
		t[c] = true
	}
	return t
}()

// familyOf is FamilyOf of any name: the first mark it holds, in the order
// of marks.
func familyOf(name string) Family {
	for _, m := range marks {
		if m.Whole && name == m.Text || !m.Whole && strings.Contains(name, m.Text) {
			return m.Family
		}
	}
	if IsContender(name) {
		return Foreign
	}
	return NoFamily
}

// IsContender reports whether name is that of a contender: of corral's, or
// of a client corral interoperates with. On ZooKeeper, corral, Curator,
// go-zookeeper and kazoo name their nodes "<marker><10-digit seq>" (any
// child with such a suffix is a contender); on etcd, corral's names are
// "<marker><hex suffix>", and etcd's own concurrency.Mutex and Election
// write keys named by their lease ID in hexadecimal.
func IsContender(name string) bool {
	if _, ok := store.ParseSeq(name); ok {
		return true
	}
	for _, m := range []string{Lock, Read, Write, Latch, KazooLock, KazooRead} {
		if strings.Contains(name, m) {
			return true
		}
	}
	return IsLeaseKey(name)
}

// IsLeaseKey reports whether name looks like the key etcd's concurrency
// package writes: a lease ID in lower-case hexadecimal. etcd makes lease IDs
// of a member's 16 bits over a 48-bit clock and counter, so they have 12 to
// 16 digits; shorter hexadecimal names ("a", "cafe", "deadbeef") are taken
// for what they more likely are, nodes of no recipe, so that a lock never
// waits behind a directory.
func IsLeaseKey(name string) bool {
	if len(name) < 12 || len(name) > 16 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
