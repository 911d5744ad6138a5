package store

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ValidatePath returns nil if p is a valid path and an error wrapping
// ErrInvalidPath otherwise. See the package doc for the rules.
func ValidatePath(p string) error {
	if p == "/" {
		return nil
	}
	if len(p) > MaxPathSize {
		return fmt.Errorf("%w: %d bytes, at most %d (%.40q...)", ErrInvalidPath, len(p), MaxPathSize, p)
	}
	if p == "" || p[0] != '/' {
		return pathErr(p, "not absolute")
	}
	if p[len(p)-1] == '/' {
		return pathErr(p, "trailing slash")
	}
	if depth := strings.Count(p, "/"); depth > MaxPathDepth {
		return fmt.Errorf("%w: %d segments, at most %d (%.40q...)", ErrInvalidPath, depth, MaxPathDepth, p)
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch seg {
		case "":
			return pathErr(p, "empty segment")
		case ".", "..":
			return pathErr(p, "relative segment")
		}
	}
	for _, r := range p {
		if !pathRune(r) {
			return pathErr(p, "control, private-use or invalid character")
		}
	}
	return nil
}

// pathRune reports whether r may appear in a path: not a control
// character, not invalid UTF-8 (which ranges as U+FFFD), and none of the
// characters ZooKeeper refuses (U+E000 to U+F8FF, U+FFF0 to U+FFFF), so
// that every store accepts the same paths.
func pathRune(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0xfffd:
		return false
	case r >= 0xe000 && r <= 0xf8ff, r >= 0xfff0 && r <= 0xffff:
		return false
	}
	return true
}

func pathErr(p, why string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidPath, ShortPath(p), why)
}

// MaxErrorPath is the most bytes of a path that ShortPath keeps: the start
// and the end of a longer one show where it was and what it named.
const MaxErrorPath = 160

// ShortPath returns p as an error message shows it: p itself when it has
// at most MaxErrorPath bytes; else its start and its end, about
// MaxErrorPath/2 bytes each, cut between characters, around a mark that says
// how many bytes it has in all ("/jobs/…[4096 bytes]…/lock-0000000001").
// A path may have MaxPathSize bytes, and an error that names it in every
// layer (the recipe's, the store's) would repeat all of them: every error
// of corral formats its paths through ShortPath, with %q.
func ShortPath(p string) string {
	if len(p) <= MaxErrorPath {
		return p
	}
	head, tail := p[:MaxErrorPath/2], p[len(p)-MaxErrorPath/2:]
	for len(head) > 0 && !utf8.RuneStart(p[len(head)]) {
		head = head[:len(head)-1] // end before the character it would cut
	}
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:] // start after the character it would cut
	}
	return head + "…[" + strconv.Itoa(len(p)) + " bytes]…" + tail
}

// ValidateCreate checks the arguments of a Create before any I/O: the path
// (which must not be the root), the mode and the data size.
func ValidateCreate(p string, data []byte, mode Mode) error {
	if err := ValidatePath(p); err != nil {
		return err
	}
	if p == "/" {
		return pathErr(p, "the root cannot be created")
	}
	if !mode.Valid() {
		return fmt.Errorf("%w: unknown mode %v", ErrInvalidArgument, mode)
	}
	return ValidateData(data)
}

// ValidateData returns an error wrapping ErrTooLarge when data is over
// MaxDataSize.
func ValidateData(data []byte) error {
	if len(data) > MaxDataSize {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), MaxDataSize)
	}
	return nil
}

// Join returns the path of the child name of parent. It does not validate.
func Join(parent, name string) string {
	if parent == "/" {
		return "/" + name
	}
	return parent + "/" + name
}

// Parent returns the parent of a valid path; the parent of "/" is "/".
func Parent(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}

// Base returns the last segment of a valid path; "" for "/".
func Base(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// SeqDigits is the width of a sequence suffix, as ZooKeeper writes it.
const SeqDigits = 10

// FormatSeq formats seq as a sequence suffix, the way ZooKeeper does
// ("%010d"), so that suffixes of equal width sort as numbers.
func FormatSeq(seq int64) string {
	return fmt.Sprintf("%0*d", SeqDigits, seq)
}

// ParseSeq returns the sequence number in the last SeqDigits characters of
// name, as written by ZooKeeper for sequential nodes (by corral, Curator,
// kazoo or go-zookeeper alike), and whether there was one. ZooKeeper's
// counter is a signed 32-bit integer; past 2147483647 it overflows into
// negative suffixes whose order ZooKeeper itself leaves undefined, and
// ParseSeq does not accept them.
func ParseSeq(name string) (int64, bool) {
	if len(name) < SeqDigits {
		return 0, false
	}
	var n int64
	for _, c := range []byte(name[len(name)-SeqDigits:]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// SortChildren sorts children the way Children returns them: by Seq, then by
// name.
func SortChildren(kids []Child) {
	slices.SortFunc(kids, func(a, b Child) int {
		if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// Window returns the window of kids, a list sorted as SortChildren sorts
// it, that WindowLister.ChildrenUpTo returns: the last n children whose Seq
// is at most seq, and whether they are all of them. A store that lists all
// children anyway answers ChildrenUpTo with it.
func Window(kids []Child, seq int64, n int) (window []Child, complete bool) {
	end := len(kids)
	for end > 0 && kids[end-1].Seq > seq {
		end--
	}
	start := max(end-max(n, 0), 0) // n < 1: an empty window, not a panic
	return kids[start:end], start == 0
}
