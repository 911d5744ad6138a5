package reclaim_test

import (
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/internal/reclaim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound bounds every wait of the tests.
const bound = 10 * time.Second

// remover returns a Later's Remove that sends what it is handed on a
// channel.
func remover() (func([]string), <-chan []string) {
	ch := make(chan []string, 16)
	return func(dirs []string) { ch <- slices.Sorted(slices.Values(dirs)) }, ch
}

func recv(t *testing.T, ch <-chan []string) []string {
	t.Helper()
	select {
	case dirs := <-ch:
		return dirs
	case <-time.After(bound):
		t.Fatalf("nothing handed to Remove within %v", bound)
		return nil
	}
}

// TestLater: a directory emptied is handed to Remove once its delay is up,
// one kept meanwhile is not, and those due when Stop is called are
// returned by it and never handed over after; with no delay, at once.
func TestLater(t *testing.T) {
	remove, got := remover()
	l := &reclaim.Later{Delay: 20 * time.Millisecond, Remove: remove}
	start := time.Now()
	l.Emptied("/a")
	l.Emptied("/b")
	l.Keep("/b")
	if dirs := recv(t, got); !slices.Equal(dirs, []string{"/a"}) {
		t.Errorf("handed %v; want [/a] (/b was kept)", dirs)
	}
	if waited := time.Since(start); waited < l.Delay {
		t.Errorf("handed after %v; want no sooner than the delay, %v", waited, l.Delay)
	}

	long := &reclaim.Later{Delay: time.Hour, Remove: remove}
	long.Emptied("/c")
	long.Emptied("/d")
	if dirs := slices.Sorted(slices.Values(long.Stop())); !slices.Equal(dirs, []string{"/c", "/d"}) {
		t.Errorf("Stop() = %v; want [/c /d]", dirs)
	}
	long.Emptied("/e") // after Stop: held no more
	if dirs := long.Stop(); len(dirs) != 0 {
		t.Errorf("second Stop() = %v; want none", dirs)
	}

	now := &reclaim.Later{Remove: remove}
	now.Emptied("/f")
	select {
	case dirs := <-got:
		if !slices.Equal(dirs, []string{"/f"}) {
			t.Errorf("with no delay, handed %v; want [/f]", dirs)
		}
	default:
		t.Error("with no delay, Emptied returned before handing the directory over")
	}
	l.Stop()
}

// TestFlush: Flush waits for remove, at most its bound.
func TestFlush(t *testing.T) {
	release := make(chan struct{})
	done := make(chan struct{})
	start := time.Now()
	reclaim.Flush([]string{"/a"}, func([]string) {
		<-release
		close(done)
	}, 10*time.Millisecond)
	if time.Since(start) > bound {
		t.Errorf("Flush waited %v; want its bound", time.Since(start))
	}
	close(release)
	<-done
	var ran bool
	reclaim.Flush([]string{"/b"}, func([]string) { ran = true }, bound)
	if !ran {
		t.Error("Flush returned before remove did")
	}
	reclaim.Flush(nil, func([]string) { t.Error("remove called with nothing to remove") }, bound)
}

// TestAgain: a directory whose removal failed is handed to Remove again,
// no sooner than RetryDelay when the delay is shorter or none, and after
// the delay when it is longer (held until Stop returns it); after Stop,
// Again holds nothing.
func TestAgain(t *testing.T) {
	remove, got := remover()
	for _, delay := range []time.Duration{0, 20 * time.Millisecond} {
		l := &reclaim.Later{Delay: delay, Remove: remove}
		start := time.Now()
		l.Again("/a")
		if dirs := recv(t, got); !slices.Equal(dirs, []string{"/a"}) {
			t.Errorf("delay %v: handed %v; want [/a]", delay, dirs)
		}
		if waited := time.Since(start); waited < reclaim.RetryDelay {
			t.Errorf("delay %v: handed again after %v; want no sooner than %v", delay, waited, reclaim.RetryDelay)
		}
		if dirs := l.Stop(); len(dirs) != 0 {
			t.Errorf("delay %v: Stop() = %v after the retry; want none", delay, dirs)
		}
	}

	long := &reclaim.Later{Delay: time.Hour, Remove: remove}
	long.Again("/b")
	if dirs := long.Stop(); !slices.Equal(dirs, []string{"/b"}) {
		t.Errorf("Stop() = %v; want [/b], held for the delay", dirs)
	}
	long.Again("/c") // after Stop: held no more
	if dirs := long.Stop(); len(dirs) != 0 {
		t.Errorf("second Stop() = %v; want none", dirs)
	}
}
