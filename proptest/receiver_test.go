package proptest

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/group"
	"github.com/corral-go/corral/inspect"
	"github.com/corral-go/corral/partition"
	"github.com/corral-go/corral/queue"
	"github.com/corral-go/corral/shared"
	"github.com/corral-go/corral/sync"
	"github.com/corral-go/corral/twophase"
)

// misuseReceivers holds one value of every exported type of the
// primitives' packages that has methods: a nil pointer for a pointer type,
// whose methods are called on nil and on a zero value (new(T)), and a zero
// value for a value type. TestMisuseCoverage checks that none is left out.
var misuseReceivers = []any{
	(*sync.Mutex)(nil), (*sync.RWMutex)(nil), (*sync.MultiMutex)(nil),
	(*sync.StripedMutex)(nil), (*sync.Stripe)(nil), (*sync.Semaphore)(nil),
	(*sync.Lease)(nil), (*sync.ReadHold)(nil), (*sync.Barrier)(nil), (*sync.DoubleBarrier)(nil),
	(*sync.MemberError)(nil),
	(*queue.Queue)(nil), (*queue.Item)(nil), (*queue.Consumer)(nil), (*queue.Pending)(nil),
	queue.Delivery(0),
	(*election.Election)(nil), (*election.Leadership)(nil),
	(*election.Candidate)(nil), (*election.Observer)(nil), election.Leader{},
	(*twophase.Coordinator)(nil), (*twophase.Participant)(nil),
	(*twophase.AbortError)(nil), twophase.Reason(0),
	(*inspect.Watcher)(nil), inspect.Contender{}, (*inspect.Contender)(nil), inspect.Identity{}, inspect.Claim{}, (*inspect.Claim)(nil),
	inspect.Kind(0), (*inspect.Kind)(nil),
	(*group.Membership)(nil), (*group.Watcher)(nil), group.Member{},
	(*partition.Member)(nil), (*partition.Shard)(nil),
	(*shared.Value)(nil), (*shared.Counter)(nil), (*shared.Watcher)(nil),
}

// receiverCallTimeout bounds the ctx of a call on a nil or zero receiver:
// none has anything to wait for.
const receiverCallTimeout = 5 * time.Second

// TestNilAndZeroReceivers calls every method of every type of
// misuseReceivers on a nil pointer and on a zero value, with zero
// arguments and a live ctx: no call may panic or block, and every error
// must match a documented sentinel (store.ErrInvalidArgument, in practice).
func TestNilAndZeroReceivers(t *testing.T) {
	for _, r := range misuseReceivers {
		typ := reflect.TypeOf(r)
		recvs := map[string]reflect.Value{"zero": reflect.Zero(typ)}
		if typ.Kind() == reflect.Pointer {
			recvs["nil"] = reflect.Zero(typ)
			recvs["zero"] = reflect.New(typ.Elem())
		}
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			for kind, recv := range recvs {
				name := fmt.Sprintf("%s %v.%s", kind, typ, m.Name)
				if kind == "nil" && valueMethod(typ, m.Name) {
					continue
				}
				t.Run(name, func(t *testing.T) {
					if err := callReceiver(recv.Method(i)); err != nil {
						t.Errorf("%s: %v", name, err)
					}
				})
			}
		}
	}
}

// callReceiver calls m with zero arguments and a live ctx, and reports a
// panic, a call that blocks, a channel it returns that a receive would
// block on, or an error that matches no sentinel.
func callReceiver(m reflect.Value) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), receiverCallTimeout)
	defer cancel()
	mt := m.Type()
	var args []reflect.Value
	for i := range mt.NumIn() {
		in := mt.In(i)
		if mt.IsVariadic() && i == mt.NumIn()-1 {
			break
		}
		if in == reflect.TypeFor[context.Context]() {
			args = append(args, reflect.ValueOf(ctx))
			continue
		}
		args = append(args, reflect.Zero(in))
	}
	type result struct {
		out []reflect.Value
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("panic: %v", r)}
			}
		}()
		done <- result{out: m.Call(args)}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(receiverCallTimeout + misuseOverrun):
		return fmt.Errorf("blocked past its ctx")
	}
	if res.err != nil {
		return res.err
	}
	for _, v := range res.out {
		if v.Kind() == reflect.Chan && v.Type().ChanDir()&reflect.RecvDir != 0 {
			// Nothing will ever send on a nil or zero value's channel:
			// it must be closed, or a receive hangs.
			if x, _ := v.TryRecv(); !x.IsValid() {
				return fmt.Errorf("returned a %v that is not closed: a receive blocks", v.Type())
			}
			continue
		}
		if v.Type() != reflect.TypeFor[error]() || v.IsNil() {
			continue
		}
		if err, _ := v.Interface().(error); classify(err) == "" {
			return fmt.Errorf("returned %v: no documented sentinel", err)
		}
	}
	return nil
}

// valueMethod reports whether the method name of the pointer type typ is
// declared on the value type.
func valueMethod(typ reflect.Type, name string) bool {
	if typ.Kind() != reflect.Pointer {
		return false
	}
	_, ok := typ.Elem().MethodByName(name)
	return ok
}
