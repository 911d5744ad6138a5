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
// exported function and method must have a misuse case here.
var coveredPackages = []string{"sync", "queue", "election", "twophase", "inspect", "group", "partition", "shared"}

// adapterPackages are the store contract and its adapters: a method of
// store.Store is covered by the generator's "Store.<M>" calls (storeCalls),
// one of an optional capability by store/storetest (which must call it),
// and anything else by a test of its package named in misuseElsewhere,
// which must exist and call it. (internal/ is not API; cmd/ is no library.)
var adapterPackages = []string{"store", "memstore", "zkstore", "etcdstore"}

// storeMethods are the methods of store.Store and the generator call that
// makes each with bad input.
var storeMethods = map[string]string{
	"Create": "Store.Create", "Get": "Store.Get", "Set": "Store.Set",
	"Children": "Store.Children", "ExistsW": "Store.ExistsW(cancelled)",
	"Delete": "Store.Delete", "SessionID": "Store.Session", "Context": "Store.Session",
	"Disconnected": "Store.Session", "Close": "Store.Session",
}

// misuseFuncs maps every exported function of coveredPackages to the calls
// of the misuse generator (misuseCalls) that make it with bad input: bad
// paths and data, nil and closed stores, cancelled contexts, zero options.
var misuseFuncs = map[string][]string{
	"sync.NewMutex":                 {"Mutex.TryLock", "Mutex.Unlock", "Mutex.Lock(cancelled)"},
	"sync.NewRWMutex":               {"RWMutex.TryRLock", "ReadHold.Unlock"},
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
	"queue.New":                     {"Queue.Put", "Queue.PutAsync", "Queue.PutBatch", "Queue.TryTake", "Queue.Take(cancelled)", "Queue.Peek", "Queue.Len", "Queue.Settings", "Queue.Consume(cancelled)"},
	"queue.WithDelivery":            {"Queue.Put", "Queue.Settings"}, // drawQueueOptions: good, bad, disagreeing
	"queue.WithVisibilityTimeout":   {"Queue.Put", "Queue.Settings"},
	"queue.WithDeadLetter":          {"Queue.Put", "Queue.Settings"},
	"queue.WithPutsInFlight":        {"Queue.Put", "Queue.PutAsync", "Queue.Settings"},
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
	"inspect.SessionString":         {"inspect.ParseIdentity"},
	"inspect.ImplicitDirs":          {"inspect.ImplicitDirs"},
	"inspect.Read":                  {"inspect.Read"},
	"inspect.Walk":                  {"inspect.Walk"},
	"inspect.Watch":                 {"inspect.Watch", "inspect.Watch(cancelled)"},
	"group.Join":                    {"group.Join", "group.Join(cancelled)", "Membership.SetValue", "Membership.Leave"},
	"group.Watch":                   {"group.Watch", "group.Watch(cancelled)"},
	"group.WithDisconnectPolicy":    {"group.Join", "group options(zero)"}, // drawGroupOptions: good, unknown, nil
	"group.WithLogger":              {"group options(zero)"},
	"group.WithMeterProvider":       {"group options(zero)"},
	"partition.Join":                {"partition.Join", "partition.Join(cancelled)", "partition.Member.Leave"},
	"partition.WithGrace":           {"partition.Join", "partition options(zero)"}, // drawPartitionOptions: zero, negative, nil
	"partition.WithRetryDelay":      {"partition.Join", "partition options(zero)"}, // drawPartitionOptions: zero, negative
	"partition.WithLogger":          {"partition options(zero)"},
	"partition.WithMeterProvider":   {"partition options(zero)"},
	"partition.MembersDir":          {"partition.Dirs"},
	"partition.ShardsDir":           {"partition.Dirs"},
	"partition.Assign":              {"partition.Assign"},
	"shared.NewValue":               {"Value.Get", "Value.Set", "Value.CompareAndSet", "Value.SetWhile", "Value.CompareAndSetWhile", "Value.Watch", "Value.Watch(cancelled)"},
	"shared.NewCounter":             {"Counter.Get", "Counter.Add"},
	"shared.Write":                  {"shared.Write", "shared options(zero)"},
	"shared.WithLogger":             {"shared options(zero)"},
	"shared.WithMeterProvider":      {"shared options(zero)"},
	"shared.WithPathLabel":          {"shared options(zero)"},
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
// coveredPackages has no misuse case: a method must be in the method set
// of a value of misuseReceivers (TestNilAndZeroReceivers calls it on nil
// and zero values; a pointer method needs the pointer type there), a
// function must be in misuseFuncs, and every generator call misuseFuncs
// names must exist.
func TestMisuseCoverage(t *testing.T) {
	called := map[string]bool{} // "pkg.T.M"
	for _, r := range misuseReceivers {
		typ := reflect.TypeOf(r)
		named := typ
		if typ.Kind() == reflect.Pointer {
			named = typ.Elem()
		}
		for i := range typ.NumMethod() {
			called[filepath.Base(named.PkgPath())+"."+named.Name()+"."+typ.Method(i).Name] = true
		}
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
			if !called[m] {
				t.Errorf("%s: no misuse case: add a nil %s (or its zero value) to misuseReceivers", m, m[:strings.LastIndexByte(m, '.')])
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

// misuseElsewhere names, for each exported function or method of
// adapterPackages that is neither a store.Store method nor a capability,
// the test of its package that makes it with bad input.
var misuseElsewhere = map[string]string{
	"store.ValidatePath":           "TestValidatePath",
	"store.ValidateCreate":         "TestValidateCreate",
	"store.Mode.Valid":             "TestValidateCreate",
	"store.ValidateData":           "TestMisuseValues",
	"store.ValidateBatch":          "TestValidateBatch",
	"store.Window":                 "TestMisuseValues",
	"store.Mode.String":            "TestMisuseValues",
	"store.EventType.String":       "TestMisuseValues",
	"store.Node.Stat":              "TestMisuseValues",
	"store.Node.Fence":             "TestMisuseValues",
	"store.Join":                   "TestPathHelpers",
	"store.Parent":                 "TestPathHelpers",
	"store.Base":                   "TestPathHelpers",
	"store.ParseSeq":               "TestParseSeq",
	"store.FormatSeq":              "TestFormatSeqSorts",
	"store.SortChildren":           "TestSortChildren",
	"store.ValidateTree":           "TestFollowTreeMisuse",
	"store.FollowTree":             "TestFollowTreeMisuse",
	"store.Depth":                  "TestDepth",
	"store.ShortPath":              "TestShortPath",
	"memstore.NewServer":           "TestPanicLeavesTreeUnlocked",
	"memstore.New":                 "TestPanicLeavesTreeUnlocked",
	"memstore.WithExpiryMargin":    "TestLifecycleMisuse",
	"memstore.WithSessionTimeout":  "TestLifecycleMisuse",
	"memstore.Store.Freeze":        "TestLifecycleMisuse",
	"memstore.Store.Thaw":          "TestLifecycleMisuse",
	"zkstore.Open":                 "TestSecureOptionsInvalid",
	"zkstore.WithDigestAuth":       "TestSecureOptionsInvalid",
	"zkstore.WithAuth":             "TestSecureOptionsInvalid",
	"zkstore.WithACL":              "TestSecureOptionsInvalid",
	"zkstore.WithChroot":           "TestSecureOptionsInvalid",
	"zkstore.WithTLS":              "TestSecureOptionsInvalid",
	"zkstore.CreatorACL":           "TestTLS", // no input
	"zkstore.WithLogger":           "TestQuietByDefault",
	"zkstore.WithSessionTimeout":   "TestDisconnectedTooLong", // under the server's least: clamped
	"zkstore.Store.SessionTimeout": "TestDeadlineBeforeServerExpiry",
	"etcdstore.Dial":               "TestInvalidArguments",
	"etcdstore.Open":               "TestInvalidArguments",
	"etcdstore.WithTTL":            "TestInvalidArguments",
	"etcdstore.WithAttemptTimeout": "TestInvalidArguments",
	"etcdstore.WithReclaimDelay":   "TestInvalidArguments",
	"zkstore.WithReclaimDelay":     "TestSecureOptionsInvalid",
	"etcdstore.WithChroot":         "TestAuth",
	"etcdstore.WithLogger":         "TestDialLogger",
	"etcdstore.Store.Client":       "TestDialLogger",
	"etcdstore.Store.TTL":          "TestDialLogger",
	"etcdstore.Store.Lease":        "TestLeaseRevoked",
	"etcdstore.Store.ImplicitDirs": "TestImplicitDirs",
	"zkstore.WithIdentityRequired": "TestIdentity",
	"store.WatchNode":              "TestMisuseValues",
	"store.Find":                   "TestFind",
	"store.ImplicitDirs":           "TestImplicitDirs",
	"store.CheckOp":                "TestValidateWrite",
	"store.CreateOp":               "TestValidateWrite",
	"store.SetOp":                  "TestValidateWrite",
	"store.DeleteOp":               "TestValidateWrite",
	"store.ValidateWrite":          "TestValidateWrite",
	"store.OpType.String":          "TestValidateWrite",
	"store.Write":                  "TestWrite",
	"store.GuardRefused":           "TestWrite",
	"store.OpRefused":              "TestWrite",
	"store.WriteError.Unwrap":      "TestWrite",
}

// TestMisuseCoverageAdapters is TestMisuseCoverage for adapterPackages.
func TestMisuseCoverageAdapters(t *testing.T) {
	var generated []string
	rapid.Check(t, func(rt *rapid.T) {
		if generated != nil {
			return
		}
		for _, c := range drawCallsAll(rt, "/coverage") {
			generated = append(generated, c.desc)
		}
	})
	suite := testSources(t, filepath.Join("..", "store", "storetest"), false)
	for _, pkg := range adapterPackages {
		dir := filepath.Join("..", pkg)
		funcs, methods := exportedAPI(t, pkg, dir)
		tests := testSources(t, dir, true)
		for _, api := range append(funcs, methods...) {
			name := api[strings.LastIndexByte(api, '.')+1:]
			if c, ok := storeMethods[name]; ok && strings.Count(api, ".") == 2 && strings.HasSuffix(api[:strings.LastIndexByte(api, '.')], ".Store") {
				if !slices.Contains(generated, c) {
					t.Errorf("%s: storeMethods names %q, which the generator does not make", api, c)
				}
				continue
			}
			if strings.Count(api, ".") == 2 && strings.Contains(suite[""], "."+name+"(") {
				continue // a capability: store/storetest calls it
			}
			test, ok := misuseElsewhere[api]
			if !ok {
				t.Errorf("%s: no misuse case: add it to misuseElsewhere", api)
				continue
			}
			body, ok := tests[test]
			if !ok {
				t.Errorf("%s: misuseElsewhere names %s, which %s's tests do not have", api, test, pkg)
			} else if !strings.Contains(body, name) {
				t.Errorf("%s: %s does not call it", api, test)
			}
		}
	}
}

// testSources returns the source of the Test functions of the package in
// dir by name, or with byTest false all its non-test source under "".
func testSources(t *testing.T, dir string, byTest bool) map[string]string {
	src := map[string]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		isTest := strings.HasSuffix(e.Name(), "_test.go")
		if !strings.HasSuffix(e.Name(), ".go") || isTest != byTest {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !byTest {
			src[""] += string(data)
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), data, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
				src[fd.Name.Name] = string(data[fset.Position(fd.Pos()).Offset:fset.Position(fd.End()).Offset])
			}
		}
	}
	return src
}
