// Package docs checks the project's markdown: every code snippet marked as
// an example's is that example's code, which go test compiles and runs,
// and every relative link resolves. It holds tests only.
package docs

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../../.."

// markdown returns the markdown files the project keeps: README.md,
// CHANGELOG.md, CONTRIBUTING.md and the docs directory.
func markdown(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md", "CHANGELOG.md", "CONTRIBUTING.md"}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		files = append(files, rel)
	}
	return files
}

// exampleMark precedes a snippet that quotes an example:
// <!-- example: sync ExampleMutex -->, the package's directory and the
// example's name.
var exampleMark = regexp.MustCompile(`^<!-- example: (\S+) (Example\w*) -->$`)

// snippet is a Go code block of a markdown file that quotes an example.
type snippet struct {
	file, dir, name string
	line            int
	code            []string
}

// snippets returns the marked Go snippets of the markdown file, and the
// line of every unmarked Go snippet.
func snippets(t *testing.T, file string) (marked []snippet, unmarked []int) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var (
		n    int
		mark []string // of the line before the block
		cur  *snippet
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && strings.HasPrefix(line, "```"):
			marked = append(marked, *cur)
			cur = nil
		case cur != nil:
			cur.code = append(cur.code, line)
		case line == "```go" && mark != nil:
			cur = &snippet{file: file, dir: mark[1], name: mark[2], line: n}
		case line == "```go":
			unmarked = append(unmarked, n)
		}
		if m := exampleMark.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			mark = m
		} else if strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "```") {
			mark = nil
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return marked, unmarked
}

// exampleBody returns the lines of the body of the example name in the
// test files of the package in dir, without the braces and one level of
// indentation less, or false when there is no such example.
func exampleBody(t *testing.T, dir, name string) ([]string, bool) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv != nil || fd.Name.Name != name || fd.Body == nil {
				continue
			}
			body := string(src[fset.Position(fd.Body.Lbrace).Offset+1 : fset.Position(fd.Body.Rbrace).Offset])
			var lines []string
			for _, l := range strings.Split(strings.Trim(body, "\n"), "\n") {
				lines = append(lines, strings.TrimPrefix(l, "\t"))
			}
			return lines, true
		}
	}
	return nil, false
}

// TestSnippetsAreExamples: every Go snippet of the README and the docs
// quotes a runnable example, marked <!-- example: DIR ExampleName -->, and
// its lines appear in that example's body in a row (the example may set up
// before and check after), so a snippet cannot drift from code that
// compiles and runs.
func TestSnippetsAreExamples(t *testing.T) {
	for _, file := range markdown(t) {
		marked, unmarked := snippets(t, file)
		for _, l := range unmarked {
			t.Errorf("%s:%d: a Go snippet with no <!-- example: DIR ExampleName --> before it", file, l)
		}
		for _, s := range marked {
			body, ok := exampleBody(t, s.dir, s.name)
			if !ok {
				t.Errorf("%s:%d: no %s in %s", s.file, s.line, s.name, s.dir)
				continue
			}
			if !contains(body, s.code) {
				t.Errorf("%s:%d: the snippet is not in %s/%s's body as it is:\n%s", s.file, s.line, s.dir, s.name, strings.Join(s.code, "\n"))
			}
		}
	}
}

// contains reports whether lines holds want as a run of lines, blank ends
// and trailing spaces aside.
func contains(lines, want []string) bool {
	norm := func(ls []string) []string {
		var out []string
		for _, l := range ls {
			out = append(out, strings.TrimRight(l, " \t"))
		}
		return out
	}
	lines, want = norm(lines), norm(want)
	for len(want) > 0 && want[0] == "" {
		want = want[1:]
	}
	for len(want) > 0 && want[len(want)-1] == "" {
		want = want[:len(want)-1]
	}
	if len(want) == 0 {
		return false
	}
	for i := 0; i+len(want) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// link is a markdown link: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestLinks: every relative link of the markdown files names a file of the
// repository, and a #fragment a heading of that file.
func TestLinks(t *testing.T) {
	for _, file := range markdown(t) {
		src, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(src), "\n") {
			for _, m := range link.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, frag, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
						t.Errorf("%s:%d: link %q: no %s", file, i+1, target, dest)
						continue
					}
				}
				if frag != "" && strings.HasSuffix(dest, ".md") && !hasHeading(t, dest, frag) {
					t.Errorf("%s:%d: link %q: no heading #%s in %s", file, i+1, target, frag, dest)
				}
			}
		}
	}
}

// hasHeading reports whether the markdown file has a heading whose anchor
// (as GitHub makes it: lower case, spaces to dashes, punctuation dropped)
// is frag.
func hasHeading(t *testing.T, file, frag string) bool {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		if anchor(strings.TrimLeft(line, "# ")) == frag {
			return true
		}
	}
	return false
}

func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestReadmeShort: the README is a front page, read in five minutes; the
// rest belongs in docs/.
func TestReadmeShort(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "\n"); n > 300 {
		t.Errorf("README.md has %d lines, more than 300: move the details into docs/", n)
	}
}
