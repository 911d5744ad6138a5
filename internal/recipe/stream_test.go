package recipe_test

import (
	"maps"
	"testing"

	"pgregory.net/rapid"

	"github.com/corral-go/corral/internal/recipe"
)

// A Stream against a model: whatever the changes and however seldom the
// receiver takes them, each change it takes goes from what it holds, a
// change back to what it holds is never handed out, the memory held is
// one value per key with changes not taken, and once it has taken every
// change the receiver holds the state.
func TestStream(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := recipe.NewStream[int, int](func(a, b int) bool { return a == b })
		state, held := map[int]int{}, map[int]int{}
		cur := func(k int) (int, bool) { v, ok := state[k]; return v, ok }
		take := func(t *rapid.T) bool {
			c, ok := s.Next(cur)
			if !ok {
				return false
			}
			old, had := held[c.Key]
			if had != c.Had || had && old != c.Old {
				t.Fatalf("change of %d from (%d, %v); the receiver holds (%d, %v)", c.Key, c.Old, c.Had, old, had)
			}
			if c.Had == c.Has && (!c.Has || c.Old == c.New) {
				t.Fatalf("change of %d to what the receiver holds: %+v", c.Key, c)
			}
			if nv, ok := cur(c.Key); ok != c.Has || ok && nv != c.New {
				t.Fatalf("change of %d to (%d, %v); the state is (%d, %v)", c.Key, c.New, c.Has, nv, ok)
			}
			if c.Has {
				held[c.Key] = c.New
			} else {
				delete(held, c.Key)
			}
			s.Pop(c.Key)
			return true
		}
		t.Repeat(map[string]func(*rapid.T){
			"set": func(t *rapid.T) {
				k, v := rapid.IntRange(0, 5).Draw(t, "k"), rapid.IntRange(0, 2).Draw(t, "v")
				old, had := state[k]
				s.Note(k, old, had)
				state[k] = v
			},
			"delete": func(t *rapid.T) {
				k := rapid.IntRange(0, 5).Draw(t, "k")
				if old, had := state[k]; had {
					s.Note(k, old, had)
					delete(state, k)
				}
			},
			"take": func(t *rapid.T) { take(t) },
			"": func(t *rapid.T) {
				if s.Len() > 6 {
					t.Fatalf("%d keys pending, of 6", s.Len())
				}
			},
		})
		for take(t) {
		}
		if !maps.Equal(state, held) {
			t.Fatalf("the receiver holds %v; the state is %v", held, state)
		}
	})
}
