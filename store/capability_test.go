package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corral-go/corral/store"
)

func TestValidateBatch(t *testing.T) {
	one := []store.BatchNode{{Name: "a-", Data: []byte("x")}}
	many := make([]store.BatchNode, store.MaxBatchNodes+1)
	for i := range many {
		many[i].Name = "n"
	}
	full := make([]store.BatchNode, store.MaxBatchNodes)
	for i := range full {
		full[i].Name = "n"
	}
	half := store.MaxBatchSize / 2
	for _, c := range []struct {
		what   string
		parent string
		batch  []store.BatchNode
		mode   store.Mode
		want   error
	}{
		{"good", "/q/items", one, store.Sequential, nil},
		{"persistent", "/q/items", one, store.Persistent, nil},
		{"root parent", "/", one, store.Sequential, nil},
		{"MaxBatchNodes", "/q", full, store.Sequential, nil},
		{"at MaxBatchSize", "/q", []store.BatchNode{{Name: "a", Data: make([]byte, half-4)}, {Name: "b", Data: make([]byte, store.MaxBatchSize-half-4)}}, store.Sequential, nil},
		{"over MaxBatchSize", "/q", []store.BatchNode{{Name: "a", Data: make([]byte, half-3)}, {Name: "b", Data: make([]byte, store.MaxBatchSize-half-4)}}, store.Sequential, store.ErrTooLarge},
		{"over MaxBatchNodes", "/q", many, store.Sequential, store.ErrTooLarge},
		{"nil", "/q", nil, store.Sequential, store.ErrInvalidArgument},
		{"empty", "/q", []store.BatchNode{}, store.Sequential, store.ErrInvalidArgument},
		{"ephemeral", "/q", one, store.Ephemeral, store.ErrInvalidArgument},
		{"ephemeral sequential", "/q", one, store.EphemeralSequential, store.ErrInvalidArgument},
		{"unknown mode", "/q", one, store.Mode(4), store.ErrInvalidArgument},
		{"bad parent", "q", one, store.Sequential, store.ErrInvalidPath},
		{"empty name", "/q", []store.BatchNode{{}}, store.Sequential, store.ErrInvalidPath},
		{"name with a slash", "/q", []store.BatchNode{{Name: "a/b"}}, store.Sequential, store.ErrInvalidPath},
		{"bad name", "/q", []store.BatchNode{{Name: ".."}}, store.Sequential, store.ErrInvalidPath},
		{"path too long", "/q", []store.BatchNode{{Name: strings.Repeat("x", store.MaxPathSize)}}, store.Sequential, store.ErrInvalidPath},
		{"data over MaxDataSize", "/q", []store.BatchNode{{Name: "a", Data: make([]byte, store.MaxDataSize+1)}}, store.Sequential, store.ErrTooLarge},
	} {
		err := store.ValidateBatch(c.parent, c.batch, c.mode)
		if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("ValidateBatch(%s) = %v; want %v", c.what, err, c.want)
		}
	}
}
