package cache

import (
	"fmt"
	"maps"
	"testing"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/store"
)

// pmap against a map: every version stays what it was when taken.
func TestPmap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type version struct {
			m    pmap
			want map[string]*node
		}
		m := pmap{}.thaw()
		want := map[string]*node{}
		var versions []version
		keys := rapid.SampledFrom([]string{"/a", "/b", "/a/b", "/c/d/e", "/x", "/y", "/z", "/w"})
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				k := keys.Draw(t, "k")
				n := &node{Path: k, Version: int64(rapid.IntRange(0, 9).Draw(t, "v"))}
				m = m.set(k, n)
				want[k] = n
			},
			"del": func(t *rapid.T) {
				k := keys.Draw(t, "k")
				m = m.del(k)
				delete(want, k)
			},
			"snapshot": func(t *rapid.T) {
				versions = append(versions, version{m, maps.Clone(want)})
				m = m.thaw() // as a Tree does once it handed m out
			},
			"": func(t *rapid.T) {
				for _, v := range append(versions, version{m, want}) {
					if v.m.len() != len(v.want) {
						t.Fatalf("len = %d; want %d", v.m.len(), len(v.want))
					}
					got := map[string]*node{}
					v.m.each(func(k string, n *node) bool { got[k] = n; return true })
					if !maps.Equal(got, v.want) {
						t.Fatalf("entries = %v; want %v", got, v.want)
					}
					for k, n := range v.want {
						if g, ok := v.m.get(k); !ok || g != n {
							t.Fatalf("get(%s) = %v, %v; want %v", k, g, ok, n)
						}
					}
				}
			},
		})
	})
}

// A large map, with keys enough to go several levels down and back.
func TestPmapLarge(t *testing.T) {
	m := pmap{}.thaw()
	const n = 20000
	for i := range n {
		k := fmt.Sprintf("/k/%d", i)
		m = m.set(k, &store.Node{Path: k})
	}
	old := m
	m = m.thaw()
	for i := 0; i < n; i += 2 {
		m = m.del(fmt.Sprintf("/k/%d", i))
	}
	if m.len() != n/2 || old.len() != n {
		t.Fatalf("len = %d, %d; want %d, %d", m.len(), old.len(), n/2, n)
	}
	for i := range n {
		k := fmt.Sprintf("/k/%d", i)
		if _, ok := m.get(k); ok != (i%2 == 1) {
			t.Fatalf("get(%s) found %v", k, ok)
		}
		if _, ok := old.get(k); !ok {
			t.Fatalf("old get(%s) lost", k)
		}
	}
	for i := 1; i < n; i += 2 {
		m = m.del(fmt.Sprintf("/k/%d", i))
	}
	if m.len() != 0 || m.root != nil {
		t.Fatalf("emptied map: len %d, root %v", m.len(), m.root)
	}
}
