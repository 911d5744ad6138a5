package names_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestWire pins the names on the wire: other clients (Curator, kazoo,
// go-zookeeper, etcd's concurrency package) and corral's processes of other
// versions share directories by them. A failure here is a change of the
// layout, never a refactoring.
func TestWire(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{names.Lock, "lock-"},
		{names.Read, "__READ__"},
		{names.Write, "__WRIT__"},
		{names.Latch, "latch-"},
		{names.KazooLock, "__lock__"},
		{names.KazooRead, "__rlock__"},
		{names.Lease, "lease-"},
		{names.Member, "member-"},
		{names.Group, "group-"},
		{names.KazooParty, "__party__"},
		{names.GroupMember, "__party__group-"},
		{names.Ready, "ready"},
		{names.Items, "items"},
		{names.Claims, "claims"},
		{names.Deliveries, "deliveries"},
		{names.Config, "config"},
		{names.ConfigMagic, "corral queue "},
		{names.ItemName(0, "0123456789abcdef"), "qi-7fffffffffffffff-i0123456789abcdef-"},
		{names.ItemName(-1, "0123456789abcdef"), "qi-8000000000000000-i0123456789abcdef-"},
		{names.ReturnName(1, 2, "0123456789abcdef", 3), "qi-7ffffffffffffffe-r8000000000000002-i0123456789abcdef-d3-"},
	} {
		if tt.got != tt.want {
			t.Errorf("name = %q; want %q", tt.got, tt.want)
		}
	}
}

const uuid = "0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10"

// TestFamilyOf: every mark tells its family, alone, as ZooKeeper names a
// sequential node (with and without Curator's protected prefix) and as etcd
// does; what no recipe writes is foreign when it looks like a contender,
// else of no family.
func TestFamilyOf(t *testing.T) {
	marks := names.Marks()
	if len(marks) == 0 {
		t.Fatal("Marks() is empty")
	}
	for _, m := range marks {
		got := []string{m.Text}
		if !m.Whole {
			got = append(got, m.Text+store.FormatSeq(7), "_c_"+uuid+"-"+m.Text+store.FormatSeq(7), m.Text+"694d7c1e8b3a2f04")
		}
		for _, name := range got {
			if f := names.FamilyOf(name); f != m.Family {
				t.Errorf("FamilyOf(%q) = %v; want %v", name, f, m.Family)
			}
		}
		if m.Whole {
			if f := names.FamilyOf(m.Text + "-old"); f == m.Family {
				t.Errorf("FamilyOf(%q) = %v; want another family: %q is a whole name", m.Text+"-old", f, m.Text)
			}
		}
	}
	for _, tt := range []struct {
		name string
		want names.Family
	}{
		{"0000000007", names.Foreign},                  // a bare ZooKeeper suffix
		{"694d7c1e8b3a2f04", names.Foreign},            // etcd's concurrency key
		{"x-0000000007", names.Foreign},                // another client's marker
		{"cafe", names.NoFamily},                       // a directory, not a lease ID
		{"orders", names.NoFamily},                     // a directory
		{"", names.NoFamily},                           //
		{"partition-k16-0000000003", names.Partitions}, // a partition's member
		{"s3-only-lock-0000000004", names.Locks},       // a stripe's contender
	} {
		if f := names.FamilyOf(tt.name); f != tt.want {
			t.Errorf("FamilyOf(%q) = %v; want %v", tt.name, f, tt.want)
		}
	}
}

// TestFamilyOfFirstMark: a name holds the family of the first mark it
// carries, in the order of Marks, wherever the mark stands: also in a
// protected prefix that is no uuid, and beside the marker of a
// sequential node's name, which FamilyOf reads at once.
func TestFamilyOfFirstMark(t *testing.T) {
	first := func(name string) names.Family {
		for _, m := range names.Marks() {
			if m.Whole && name == m.Text || !m.Whole && strings.Contains(name, m.Text) {
				return m.Family
			}
		}
		if names.IsContender(name) {
			return names.Foreign
		}
		return names.NoFamily
	}
	marks := names.Marks()
	for _, m := range marks {
		for _, o := range marks {
			pad := func(s string) string { return (s + strings.Repeat("0", 36))[:36] }
			for _, name := range []string{
				"_c_" + uuid + "-" + m.Text + store.FormatSeq(7),
				"_c_" + strings.ToUpper(uuid) + "-" + m.Text + store.FormatSeq(7),
				"_c_" + pad(o.Text) + "-" + m.Text + store.FormatSeq(7), // a mark where the uuid goes
				"_c_" + pad("-"+o.Text) + "-" + m.Text + store.FormatSeq(7),
				"_c_" + uuid + "-" + o.Text + m.Text + store.FormatSeq(7), // two marks
				"_c_" + uuid + "-" + m.Text + "x" + store.FormatSeq(7),
				"_c_" + uuid + m.Text + store.FormatSeq(7), // no dash after the uuid
				o.Text + "-" + m.Text + store.FormatSeq(7),
				m.Text + store.FormatSeq(7)[1:],
			} {
				if got, want := names.FamilyOf(name), first(name); got != want {
					t.Errorf("FamilyOf(%q) = %v; want %v", name, got, want)
				}
				if mk, ok := names.Marker(name); ok && (mk.Family != first(name) || !strings.Contains(name, mk.Text)) {
					t.Errorf("Marker(%q) = %+v; want a mark it holds, of family %v", name, mk, first(name))
				}
			}
		}
	}
}

// TestMarker: Marker finds the marker of the sequential names the recipes
// write, and of no other name.
func TestMarker(t *testing.T) {
	for _, m := range names.Marks() {
		for _, name := range []string{
			m.Text + store.FormatSeq(7),
			"_c_" + uuid + "-" + m.Text + store.FormatSeq(7),
			"_c_" + strings.ToUpper(uuid) + "-" + m.Text + store.FormatSeq(7),
		} {
			got, ok := names.Marker(name)
			if want := !m.Whole; ok != want || ok && got != (names.Mark{Text: m.Text, Family: m.Family}) {
				t.Errorf("Marker(%q) = %+v, %v; want %q of %v, %v", name, got, ok, m.Text, m.Family, want)
			}
		}
		for _, name := range []string{
			m.Text,
			m.Text + "694d7c1e8b3a2f04",       // etcd's suffix: FamilyOf reads it whole
			"x" + m.Text + store.FormatSeq(7), // more than the marker
			"_c_" + uuid + "-" + m.Text + "x" + store.FormatSeq(7),
		} {
			if got, ok := names.Marker(name); ok {
				t.Errorf("Marker(%q) = %+v, true; want false", name, got)
			}
		}
	}
}

// TestMarksUnique: no mark is listed twice, and no family but Foreign and
// NoFamily goes without a mark.
func TestMarksUnique(t *testing.T) {
	seen := map[string]bool{}
	families := map[names.Family]bool{}
	for _, m := range names.Marks() {
		if seen[m.Text] {
			t.Errorf("mark %q listed twice", m.Text)
		}
		seen[m.Text] = true
		families[m.Family] = true
	}
	for _, f := range []names.Family{names.Locks, names.Latches, names.Leases, names.Members, names.Queues, names.Groups, names.Partitions, names.PartitionDirs} {
		if !families[f] {
			t.Errorf("no mark of family %v", f)
		}
	}
	// Marks returns a copy: a caller cannot change what FamilyOf reads.
	m := names.Marks()
	m[0].Family = names.NoFamily
	if names.Marks()[0].Family == names.NoFamily {
		t.Errorf("Marks() shares its array with the package")
	}
}

func TestStrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{"_c_" + uuid + "-lock-0000000007", "lock-0000000007"},
		{"lock-0000000007", "lock-0000000007"},
		{"_c_short-lock-0000000007", "_c_short-lock-0000000007"},
	}
	for _, tt := range tests {
		if got := names.Strip(tt.in); got != tt.want {
			t.Errorf("Strip(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestPriorityEncodingSorts(t *testing.T) {
	prios := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -1000, -2, -1, 0, 1, 2, 1000, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	const id = "0123456789abcdef"
	for i := 1; i < len(prios); i++ {
		lo, hi := names.ItemName(prios[i-1], id), names.ItemName(prios[i], id)
		// A higher priority sorts first by name too (not relied on, but
		// it keeps listings readable).
		if !(hi < lo) {
			t.Errorf("ItemName(%d) = %q, ItemName(%d) = %q; want the second first", prios[i-1], lo, prios[i], hi)
		}
	}
	for _, p := range prios {
		for _, order := range []int64{math.MinInt64, -1, 0, 7, math.MaxInt64} {
			for _, count := range []int{0, 1, 12345} {
				for _, suffix := range []string{store.FormatSeq(42), "d123456789012345", "ffffffffffffffff"} {
					name := names.ReturnName(p, order, id, count) + suffix
					e, ok := names.ParseItem(name, 42)
					if !ok || e.Name != name || e.Prio != p || e.Order != order || e.ID != id || e.Count != count {
						t.Errorf("ParseItem(%q) = %+v, %v; want prio %d, order %d, id %s, count %d", name, e, ok, p, order, id, count)
					}
				}
			}
		}
		for _, suffix := range []string{"3f2a", "d123456789012345", store.FormatSeq(99)} {
			name := names.ItemName(p, id) + suffix
			if e, ok := names.ParseItem(name, 99); !ok || e.Prio != p || e.Order != 99 || e.ID != id || e.Count != 0 {
				t.Errorf("ParseItem(%q) = %+v, %v; want prio %d, order 99, id %s", name, e, ok, p, id)
			}
		}
	}
}

// Names written before items had ids are items, named by their whole name.
func TestParseLegacyNames(t *testing.T) {
	for _, tt := range []struct {
		name  string
		prio  int64
		order int64
	}{
		{"qi-7fffffffffffffff-0000000005", 0, 5},
		{"qi-7fffffffffffffff-3f2a9c0011223344", 0, 5},
		{"qi-7ffffffffffffffe-r8000000000000002-0000000009", 1, 2},
		{"_c_" + uuid + "-qi-7fffffffffffffff-0000000005", 0, 5},
	} {
		e, ok := names.ParseItem(tt.name, 5)
		if !ok || e.Prio != tt.prio || e.Order != tt.order || e.ID != tt.name {
			t.Errorf("ParseItem(%q) = %+v, %v; want prio %d, order %d, id the name", tt.name, e, ok, tt.prio, tt.order)
		}
	}
}

func TestParseItemRejectsForeignNames(t *testing.T) {
	for _, name := range []string{"", "items", "lock-0000000001", "qi-", "qi-zzzzzzzzzzzzzzzz-0000000001", "qi-0123", "694d9b6a1f2c3e01"} {
		if e, ok := names.ParseItem(name, 1); ok {
			t.Errorf("ParseItem(%q) = %+v, true; want false", name, e)
		}
	}
}

func TestID(t *testing.T) {
	for _, k := range []uint64{0, 1, 0xabc, 1 << 63, ^uint64(0)} {
		if got, want := names.ID(k), fmt.Sprintf("%016x", k); got != want {
			t.Errorf("ID(%#x) = %q; want %q", k, got, want)
		}
	}
}

// BenchmarkFamilyOf: the family of the names a lock's directory holds, as
// corral and Curator write them; a recipe checks every listed name.
func BenchmarkFamilyOf(b *testing.B) {
	for _, name := range []string{
		"_c_" + uuid + "-" + names.Lock + store.FormatSeq(123),
		"_c_" + uuid + "-" + names.KazooRead + store.FormatSeq(123),
		names.Lock + store.FormatSeq(123),
	} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				names.FamilyOf(name)
			}
		})
	}
}

// TestSetting: a setting written with WithSetting is read back by
// SettingOf from the store's names (ZooKeeper's protected sequential name,
// etcd's hex suffix), and names that record none say so.
func TestSetting(t *testing.T) {
	const uuid = "0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10"
	p := names.WithSetting(names.Lease, 'n', 42)
	if p != "lease-n42-" {
		t.Fatalf("WithSetting = %q; want lease-n42-", p)
	}
	for _, tt := range []struct {
		name string
		want int
		ok   bool
	}{
		{p + "0000000007", 42, true},
		{"_c_" + uuid + "-" + p + "0000000007", 42, true},
		{p + "1f2e3d4c5b6a7988", 42, true},
		{"lease-0000000007", 0, false},     // an earlier layout
		{"lease-n-0000000007", 0, false},   // no digits
		{"lease-n0-0000000007", 0, false},  // under 1
		{"lease-n+3-0000000007", 0, false}, // not plain decimal
		{"lease-k42-0000000007", 0, false}, // another key
		{"lock-n42-0000000007", 0, false},  // another marker
		{"lease-n42", 0, false},            // no dash after the value
		{"lease-n99999999999999999999-1", 0, false},
	} {
		v, ok := names.SettingOf(tt.name, names.Lease, 'n')
		if v != tt.want || ok != tt.ok {
			t.Errorf("SettingOf(%q) = %d, %v; want %d, %v", tt.name, v, ok, tt.want, tt.ok)
		}
	}
}
