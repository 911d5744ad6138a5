package proptest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// coveredPackages are the shipped packages of primitives whose every
// exported function and method must have a misuse case. (The adapters and
// store are held to the same bar by store/storetest; internal/ is not API.)
var coveredPackages = []string{"sync", "queue", "election", "twophase", "inspect"}

// misuseFuncs maps every exported function of coveredPackages to the calls
// of the misuse generator (misuseCalls) that make it with bad input: bad
// paths and data, nil and closed stores, cancelled contexts, zero options.
var misuseFuncs = map[string][]string{
	"sync.NewMutex":                 {"Mutex.TryLock", "Mutex.Unlock", "Mutex.Lock(cancelled)"},
	"sync.NewRWMutex":               {"RWMutex.TryRLock", "RWMutex.RUnlock"},
	"sync.NewMultiMutex":            {"MultiMutex.TryLock", "MultiMutex.Lock(cancelled)", "MultiMutex.Unlock"},
	"sync.NewStripedMutex":          {"StripedMutex.TryLock", "StripedMutex.Lock(cancelled)"},
	"sync.NewSemaphore":             {"Semaphore.TryAcquire"},
	"sync.NewBarrier":               {"Barrier.Set", "Barrier.Remove", "Barrier.Wait(cancelled)"},
	"sync.NewDoubleBarrier":         {"DoubleBarrier.Enter(cancelled)", "DoubleBarrier.Leave"},
	"sync.WithData":                 {"sync options(zero)"},
	"sync.WithDisconnectPolicy":     {"sync options(zero)"},
	"sync.WithLabel":                {"sync options(zero)"},
	"sync.WithLogger":               {"sync options(zero)"},
	"sync.WithMeterProvider":        {"sync options(zero)"},
	"sync.WithPathLabel":            {"sync options(zero)"},
	"queue.New":                     {"Queue.Put", "Queue.TryTake", "Queue.Take(cancelled)", "Queue.Peek", "Queue.Len", "Queue.Settings", "Queue.Consume(cancelled)"},
	"queue.WithDelivery":            {"Queue.Put", "Queue.Settings"}, // drawQueueOptions: good, bad, disagreeing
	"queue.WithVisibilityTimeout":   {"Queue.Put", "Queue.Settings"},
	"queue.WithDeadLetter":          {"Queue.Put", "Queue.Settings"},
	"queue.WithLogger":              {"queue options(zero)"},
	"queue.WithMeterProvider":       {"queue options(zero)"},
	"queue.WithPathLabel":           {"queue options(zero)"},
	"election.New":                  {"Election.Campaign(cancelled)", "Election.Leader", "Election.Observe", "Election.Candidate"},
	"election.WithDisconnectPolicy": {"election options(zero)"},
	"election.WithLogger":           {"election options(zero)"},
	"election.WithMeterProvider":    {"election options(zero)"},
	"election.WithPathLabel":        {"election options(zero)"},
	"twophase.Begin":                {"twophase.Begin"},
	"twophase.Resume":               {"twophase.Resume"},
	"twophase.Join":                 {"twophase.Join"},
	"twophase.Await":                {"twophase.Await(cancelled)"},
	"twophase.Collect":              {"twophase.Collect"},
	"inspect.IdentityRecord":        {"inspect.ParseIdentity"},
	"inspect.ParseIdentity":         {"inspect.ParseIdentity"},
	"inspect.Read":                  {"inspect.Read"},
	"inspect.Walk":                  {"inspect.Walk"},
	"inspect.Watch":                 {"inspect.Watch(cancelled)"},
}

// exportedAPI lists the exported functions ("pkg.F") and methods
// ("pkg.T.M") of the non-test files of the package in dir.
func exportedAPI(t *testing.T, pkg, dir string) (funcs, methods []string) {
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || !fd.Name.IsExported() {
				continue
			}
			if fd.Recv == nil {
				funcs = append(funcs, pkg+"."+fd.Name.Name)
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
				methods = append(methods, pkg+"."+id.Name+"."+fd.Name.Name)
			}
		}
	}
	return funcs, methods
}

// TestMisuseCoverage fails when an exported function or method of
// coveredPackages has no misuse case: a method's type must be in
// misuseReceivers (TestNilAndZeroReceivers calls it on nil and zero
// values), a function must be in misuseFuncs, and every generator call
// misuseFuncs names must exist.
func TestMisuseCoverage(t *testing.T) {
	receivers := map[string]bool{}
	for _, r := range misuseReceivers {
		typ := reflect.TypeOf(r)
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		receivers[filepath.Base(typ.PkgPath())+"."+typ.Name()] = true
	}
	var generated []string
	rapid.Check(t, func(rt *rapid.T) {
		if generated != nil {
			return
		}
		for _, c := range drawCallsAll(rt, "/coverage") {
			generated = append(generated, c.desc)
		}
	})
	for _, pkg := range coveredPackages {
		funcs, methods := exportedAPI(t, pkg, filepath.Join("..", pkg))
		for _, m := range methods {
			if typ := m[:strings.LastIndexByte(m, '.')]; !receivers[typ] {
				t.Errorf("%s: no misuse case: add %s to misuseReceivers", m, typ)
			}
		}
		for _, f := range funcs {
			calls, ok := misuseFuncs[f]
			if !ok {
				t.Errorf("%s: no misuse case: add it to misuseFuncs and the generator", f)
			}
			for _, c := range calls {
				if !slices.Contains(generated, c) {
					t.Errorf("%s: misuseFuncs names %q, which the generator does not make", f, c)
				}
			}
		}
	}
}
