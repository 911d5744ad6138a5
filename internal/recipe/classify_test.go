package recipe

import (
	"strings"
	"testing"

	"github.com/corral-go/corral/internal/names"
	"github.com/corral-go/corral/store"
)

// TestClassify: classify, which reads a name's marker alone where it can,
// tells what FamilyOf, kindOf and Parse tell from the whole name, for
// names with every mark in every place.
func TestClassify(t *testing.T) {
	const uuid = "0f8a3c1e-7d2b-4c55-9a1e-3b2f6d8e9c10"
	marks := names.Marks()
	for _, m := range marks {
		for _, o := range marks {
			pad := func(s string) string { return (s + strings.Repeat("0", 36))[:36] }
			for _, name := range []string{
				m.Text,
				m.Text + store.FormatSeq(7),
				"_c_" + uuid + "-" + m.Text + store.FormatSeq(7),
				"_c_" + strings.ToUpper(uuid) + "-" + m.Text + store.FormatSeq(7),
				"_c_" + pad(o.Text) + "-" + m.Text + store.FormatSeq(7),
				"_c_" + uuid + "-" + o.Text + m.Text + store.FormatSeq(7),
				"8c1f0e2d3b4a59687766554433221100" + m.Text + store.FormatSeq(7),
				m.Text + "694d7c1e8b3a2f04",
			} {
				f, kind, ok := classify(name)
				wantKind, wantOK := Parse(name)
				if wantF := names.FamilyOf(name); f != wantF || kind != wantKind || ok != wantOK {
					t.Errorf("classify(%q) = %v, %v, %v; want %v, %v, %v", name, f, kind, ok, wantF, wantKind, wantOK)
				}
			}
		}
	}
}

// BenchmarkContenders: the contenders of a lock's directory of 128, as a
// waiter reads them from every listing.
func BenchmarkContenders(b *testing.B) {
	kids := make([]store.Child, 128)
	for i := range kids {
		name := "_c_" + strings.Repeat("7", 8) + "-7d2b-4c55-9a1e-3b2f6d8e9c10-" + names.Lock + store.FormatSeq(int64(i))
		kids[i] = store.Child{Name: name, Seq: int64(i)}
	}
	for b.Loop() {
		if _, err := contenders("/l", kids, names.Locks); err != nil {
			b.Fatal(err)
		}
	}
}
