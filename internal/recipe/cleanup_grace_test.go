package recipe_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-go/corral/internal/recipe"
)

// TestGraceCountsFromDeadline: a ctx that passed its deadline a while ago
// gets what is left of the grace after its deadline, not a whole grace from
// now (the store may have spent part of it undoing the call ctx ended, and a
// cancelled Lock must return within its ctx plus the grace).
func TestGraceCountsFromDeadline(t *testing.T) {
	const past = 600 * time.Millisecond
	ctx, cancel := context.WithDeadline(t.Context(), time.Now().Add(-past))
	defer cancel()
	start := time.Now()
	gctx, gcancel := recipe.GraceContext(ctx)
	defer gcancel()
	select {
	case <-gctx.Done():
	case <-time.After(recipe.CleanupGrace):
		t.Fatalf("grace still running %v after a ctx %v past its deadline; want it over by %v", recipe.CleanupGrace, past, recipe.CleanupGrace-past)
	}
	if took := time.Since(start); took < recipe.CleanupGrace-past-100*time.Millisecond {
		t.Errorf("grace over after %v; want about %v", took, recipe.CleanupGrace-past)
	}
	// A ctx cancelled without a deadline gets the whole grace from now.
	cctx, ccancel := context.WithCancel(t.Context())
	ccancel()
	g2, g2cancel := recipe.GraceContext(cctx)
	defer g2cancel()
	select {
	case <-g2.Done():
		t.Fatal("grace of a cancelled ctx over at once; want the whole grace")
	default:
	}
}
