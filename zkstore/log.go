package zkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-zookeeper/zk"
)

// WithLogger sends the Store's log records to l: the session's changes
// (established, connection lost and regained, ended) and the client
// library's own messages. A nil l, the default, discards them all: the
// Store logs nothing unless asked.
//
// Levels: Info for the session established, its connection lost and
// regained; Warn for a session that ends other than by Close, and for the
// client's errors; Debug for the rest (connections made, the client's
// chatter while the Store shuts down). WithLogger must be given before
// Open; the logger must be safe for concurrent use, as slog's are.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.logger = l }
}

// discardLogger is the logger of a Store given none.
var discardLogger = slog.New(slog.DiscardHandler)

// clientLogger adapts the client's Printf logging onto the Store's slog
// logger, with a level read from the message.
type clientLogger struct {
	s *Store
	l *slog.Logger
}

func (c clientLogger) Printf(format string, args ...any) {
	level := clientLevel(format, args)
	if c.s.over.Load() {
		// The Store has ended the session and is shutting the client
		// down: what the client says now is about that.
		level = slog.LevelDebug
	}
	ctx := context.Background()
	if !c.l.Enabled(ctx, level) {
		return
	}
	c.l.Log(ctx, level, "zk: "+fmt.Sprintf(format, args...), "session", fmt.Sprintf("%#x", c.s.SessionID()))
}

// clientLevel is the level of a message of the client: Debug for news of a
// working connection, Warn for everything else.
func clientLevel(format string, args []any) slog.Level {
	switch {
	case strings.HasPrefix(format, "connected to "),
		strings.HasPrefix(format, "authenticated: "),
		strings.HasPrefix(format, "re-submitting "):
		return slog.LevelDebug
	case strings.HasPrefix(format, "send loop terminated: "),
		strings.HasPrefix(format, "recv loop terminated: "):
		if len(args) == 1 && (args[0] == nil || isEOF(args[0])) {
			return slog.LevelDebug
		}
	case strings.HasPrefix(format, "authentication failed: "):
		// An expired session: the Store says so itself, more clearly.
		if len(args) == 1 && isErr(args[0], zk.ErrSessionExpired) {
			return slog.LevelDebug
		}
	}
	return slog.LevelWarn
}

func isEOF(v any) bool { return isErr(v, io.EOF) }

func isErr(v any, target error) bool {
	err, ok := v.(error)
	return ok && errors.Is(err, target)
}
