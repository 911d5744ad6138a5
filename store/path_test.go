package store_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/goleak"

	"github.com/corral-go/corral/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path string
		ok   bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b/c", true},
		{"/lock/_c_8f0e-lock-0000000001", true},
		{"/a b/ü/日本", true},
		{"/...", true},
		{"", false},
		{"a", false},
		{"a/b", false},
		{"//", false},
		{"/a/", false},
		{"/a//b", false},
		{"/.", false},
		{"/a/./b", false},
		{"/a/..", false},
		{"/a\x00b", false},
		{"/a\tb", false},
		{"/a\x7f", false},
		{"/a\u009f", false},
		{"/a\xff", false},
	}
	for _, tt := range tests {
		err := store.ValidatePath(tt.path)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, store.ErrInvalidPath) {
			t.Errorf("ValidatePath(%q) = %v; want ok=%v", tt.path, err, tt.ok)
		}
	}
}

func TestValidateCreate(t *testing.T) {
	tests := []struct {
		path string
		data []byte
		mode store.Mode
		want error
	}{
		{"/a", nil, store.Persistent, nil},
		{"/a", make([]byte, store.MaxDataSize), store.EphemeralSequential, nil},
		{"/", nil, store.Persistent, store.ErrInvalidPath},
		{"a", nil, store.Persistent, store.ErrInvalidPath},
		{"/a", nil, store.Mode(4), store.ErrInvalidArgument},
		{"/a", make([]byte, store.MaxDataSize+1), store.Persistent, store.ErrTooLarge},
	}
	for _, tt := range tests {
		err := store.ValidateCreate(tt.path, tt.data, tt.mode)
		if tt.want == nil && err != nil || !errors.Is(err, tt.want) {
			t.Errorf("ValidateCreate(%q, %d bytes, %v) = %v; want %v", tt.path, len(tt.data), tt.mode, err, tt.want)
		}
	}
}

func TestPathHelpers(t *testing.T) {
	tests := []struct{ path, parent, base string }{
		{"/", "/", ""},
		{"/a", "/", "a"},
		{"/a/b", "/a", "b"},
		{"/a/b/c-0000000001", "/a/b", "c-0000000001"},
	}
	for _, tt := range tests {
		if got := store.Parent(tt.path); got != tt.parent {
			t.Errorf("Parent(%q) = %q; want %q", tt.path, got, tt.parent)
		}
		if got := store.Base(tt.path); got != tt.base {
			t.Errorf("Base(%q) = %q; want %q", tt.path, got, tt.base)
		}
		if tt.path != "/" {
			if got := store.Join(tt.parent, tt.base); got != tt.path {
				t.Errorf("Join(%q, %q) = %q; want %q", tt.parent, tt.base, got, tt.path)
			}
		}
	}
}

func TestParseSeq(t *testing.T) {
	tests := []struct {
		name string
		seq  int64
		ok   bool
	}{
		{"lock-0000000000", 0, true},
		{"_c_2a7c3b9e-5f1d-4c2e-9b1a-0d3c4e5f6a7b-lock-0000000042", 42, true},
		{"__READ__0000000007", 7, true},
		{"latch-2147483647", 2147483647, true},
		{"x-9999999999", 9999999999, true},
		{"lock--000000001", 0, false},
		{"0000000001", 1, true},
		{"lock-000000001", 0, false},
		{"lock", 0, false},
		{"", 0, false},
		{"lock-00000000a1", 0, false},
		{"lock-0000-00001", 0, false},
		{"694d7b2a1e8e3f01", 0, false},
	}
	for _, tt := range tests {
		seq, ok := store.ParseSeq(tt.name)
		if seq != tt.seq || ok != tt.ok {
			t.Errorf("ParseSeq(%q) = %d, %v; want %d, %v", tt.name, seq, ok, tt.seq, tt.ok)
		}
	}
}

func TestFormatSeqSorts(t *testing.T) {
	prev := ""
	for _, n := range []int64{0, 1, 9, 10, 99, 1000, 2147483647, 9999999999} {
		s := store.FormatSeq(n)
		if len(s) != store.SeqDigits || s <= prev {
			t.Errorf("FormatSeq(%d) = %q after %q; want %d digits, sorting after", n, s, prev, store.SeqDigits)
		}
		prev = s
	}
}

func TestSortChildren(t *testing.T) {
	kids := []store.Child{{"c", 3}, {"b", 0}, {"a", 3}, {"z", 1}}
	store.SortChildren(kids)
	if got, want := fmt.Sprint(kids), "[{b 0} {z 1} {a 3} {c 3}]"; got != want {
		t.Errorf("SortChildren = %s; want %s", got, want)
	}
}

// FuzzValidatePath checks that accepted paths follow every rule and that the
// path helpers agree with them.
func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"/", "/a/b", "/a//b", "/a/../b", "a", "/a/", "/\x00", "/日本/x"} {
		f.Add(s)
	}
	f.Add("/" + strings.Repeat("a", store.MaxPathSize-1))
	f.Add("/" + strings.Repeat("a", store.MaxPathSize))
	f.Add("/")
	f.Fuzz(func(t *testing.T, p string) {
		if err := store.ValidatePath(p); err != nil {
			if !errors.Is(err, store.ErrInvalidPath) {
				t.Fatalf("ValidatePath(%q) = %v; want ErrInvalidPath", p, err)
			}
			return
		}
		if len(p) > store.MaxPathSize || strings.Count(p, "/") > store.MaxPathDepth {
			t.Fatalf("ValidatePath accepted a path of %d bytes and %d segments, over the limits", len(p), strings.Count(p, "/"))
		}
		if !strings.HasPrefix(p, "/") || !utf8.ValidString(p) {
			t.Fatalf("ValidatePath(%q) accepted a relative or non-UTF-8 path", p)
		}
		if p == "/" {
			return
		}
		if strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
			t.Fatalf("ValidatePath(%q) accepted an empty segment", p)
		}
		for _, seg := range strings.Split(p[1:], "/") {
			if seg == "." || seg == ".." {
				t.Fatalf("ValidatePath(%q) accepted a relative segment", p)
			}
		}
		for _, r := range p {
			if r < 0x20 || r == 0x7f || r >= 0xe000 && r <= 0xf8ff || r >= 0xfff0 && r <= 0xffff {
				t.Fatalf("ValidatePath(%q) accepted a control or private-use character", p)
			}
		}
		parent, base := store.Parent(p), store.Base(p)
		if store.ValidatePath(parent) != nil || base == "" || store.Join(parent, base) != p {
			t.Fatalf("Parent/Base/Join(%q) = %q, %q: not a valid split", p, parent, base)
		}
	})
}

// FuzzParseSeq checks that ParseSeq reads back what FormatSeq writes behind
// any name, and never accepts a suffix that is not a number.
func FuzzParseSeq(f *testing.F) {
	f.Add("lock-", int64(0))
	f.Add("_c_2a7c3b9e-lock-", int64(42))
	f.Add("__READ__", int64(2147483647))
	f.Add("", int64(9999999999))
	f.Fuzz(func(t *testing.T, name string, seq int64) {
		if seq >= 0 && seq <= 9999999999 {
			got, ok := store.ParseSeq(name + store.FormatSeq(seq))
			if !ok || got != seq {
				t.Fatalf("ParseSeq(%q + FormatSeq(%d)) = %d, %v", name, seq, got, ok)
			}
		}
		if got, ok := store.ParseSeq(name); ok {
			if got < 0 || store.FormatSeq(got) != name[len(name)-store.SeqDigits:] {
				t.Fatalf("ParseSeq(%q) = %d, but FormatSeq gives %q", name, got, store.FormatSeq(got))
			}
		}
	})
}

// FuzzPathSize builds paths of many segments around MaxPathSize: a path is
// valid exactly when it is at most MaxPathSize bytes (its segments being
// valid), whatever its shape.
func FuzzPathSize(f *testing.F) {
	f.Add("a", 1)
	f.Add("segment", 500)
	f.Add("x", 2048)
	f.Add("日本", 700)
	f.Fuzz(func(t *testing.T, seg string, n int) {
		if seg == "" || n <= 0 || n > 5000 || store.ValidatePath("/"+seg) != nil || strings.Contains(seg, "/") {
			return
		}
		p := strings.Repeat("/"+seg, n)
		err := store.ValidatePath(p)
		if valid := len(p) <= store.MaxPathSize && n <= store.MaxPathDepth; valid != (err == nil) {
			t.Fatalf("ValidatePath(%d bytes of %q) = %v; want valid: %v", len(p), seg, err, valid)
		}
		if err != nil && !errors.Is(err, store.ErrInvalidPath) {
			t.Fatalf("ValidatePath(%d bytes) = %v; want ErrInvalidPath", len(p), err)
		}
		err = store.ValidateCreate(p, make([]byte, store.MaxDataSize), store.Persistent)
		if (len(p) <= store.MaxPathSize && n <= store.MaxPathDepth) != (err == nil) {
			t.Fatalf("ValidateCreate(%d bytes, MaxDataSize) = %v", len(p), err)
		}
	})
}

// TestShortPath: a path an error shows is the path up to store.MaxErrorPath
// bytes, else its start and end around its length, never a cut character.
func TestShortPath(t *testing.T) {
	long := "/" + strings.Repeat("a", store.MaxPathSize-1)
	runes := "/" + strings.Repeat("é", (store.MaxPathSize-1)/2) // 2 bytes each
	for _, tt := range []struct{ path, want string }{
		{"", ""},
		{"/", "/"},
		{"/a/b", "/a/b"},
		{long[:store.MaxErrorPath], long[:store.MaxErrorPath]},
		{long, long[:store.MaxErrorPath/2] + "…[4096 bytes]…" + long[len(long)-store.MaxErrorPath/2:]},
	} {
		if got := store.ShortPath(tt.path); got != tt.want {
			t.Errorf("store.ShortPath(%d bytes) = %q; want %q", len(tt.path), got, tt.want)
		}
	}
	got := store.ShortPath(runes)
	if !utf8.ValidString(got) || len(got) > store.MaxErrorPath+len("…[4095 bytes]…") || !strings.Contains(got, "…[4095 bytes]…") {
		t.Errorf("store.ShortPath(%d bytes of 2-byte characters) = %q; want valid UTF-8 around the length", len(runes), got)
	}
	if err := store.ValidatePath(long[:store.MaxPathSize-1] + "\x00"); len(err.Error()) > 2*store.MaxErrorPath {
		t.Errorf("store.ValidatePath(a 4 KB path) = an error of %d bytes; want the path shortened", len(err.Error()))
	}
}
