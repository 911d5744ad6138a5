package telemetry

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The outcomes of a write of a shared value or counter, or of a guarded
// write (corral.shared.writes).
const (
	// Written: the write was applied.
	Written = "written"
	// Conflict: the value's version moved since it was read; a counter's
	// add tries again.
	Conflict = "conflict"
	// LostHold: a guarded write found its hold's node gone, and wrote
	// nothing.
	LostHold = "lost"
	// WriteFailed: any other error.
	WriteFailed = "failed"
)

// Wrote records the outcome of one write of the node at path (one of
// Written, Conflict, LostHold, WriteFailed), and logs those that were not
// applied, with err.
func (r *Recorder) Wrote(ctx context.Context, path, outcome string, err error) {
	if r == nil {
		return
	}
	set := attribute.NewSet(KeyKind.String(r.kind), KeyPath.String(r.label), KeyOutcome.String(outcome))
	r.in.writes.Add(ctx, 1, metric.WithAttributeSet(set))
	if outcome != Written && r.logging(ctx) {
		r.log.LogAttrs(ctx, slog.LevelDebug, "corral: write not applied", r.logAttrs(
			slog.String("node", path), slog.String("outcome", outcome), slog.Any("error", err))...)
	}
}
