package election_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corral-go/corral/election"
	"github.com/corral-go/corral/internal/testing/backends"
	"github.com/corral-go/corral/internal/testing/zkbackend"
	"github.com/corral-go/corral/internal/testing/zkserver"
	"github.com/corral-go/corral/store"
	"github.com/corral-go/corral/store/storetest"
	"github.com/corral-go/corral/zkstore"
)

// TestLeadershipEndsBeforeNextLeader: a leader whose connection freezes for
// longer than its session timeout stops leading (Done is closed) before a
// candidate in another session is told it leads, under both disconnect
// policies, every time (10 runs a case, in parallel), on ZooKeeper under
// KeepOnDisconnect too.
func TestLeadershipEndsBeforeNextLeader(t *testing.T) {
	const session = 2 * time.Second
	for _, name := range []string{"zk", "etcd"} {
		t.Run(name, func(t *testing.T) {
			if !backends.Selected(name) {
				t.Skipf("%s not in CORRAL_STORES", name)
			}
			leaderExpiryCases(t, backends.Short(t, name, session), backends.Get(t, name))
		})
	}
	t.Run("zk-clamped", func(t *testing.T) {
		if !backends.Selected("zk") {
			t.Skip("zk not in CORRAL_STORES")
		}
		zkserver.Require(t)
		srv := zkserver.ForTest(t, zkserver.Config{MaxSessionTimeout: session})
		hb := zkbackend.New([]string{srv.Addr()}, zkstore.WithSessionTimeout(3*session))
		leaderExpiryCases(t, hb, zkbackend.New([]string{srv.Addr()}))
	})
}

func leaderExpiryCases(t *testing.T, hb, nb storetest.Backend) {
	const runs = 10
	for _, policy := range []election.DisconnectPolicy{election.LoseOnDisconnect, election.KeepOnDisconnect} {
		t.Run(policy.String(), func(t *testing.T) {
			margins := make([]time.Duration, runs)
			t.Run("runs", func(t *testing.T) {
				for i := range runs {
					t.Run(fmt.Sprint(i), func(t *testing.T) {
						t.Parallel()
						p := dir(t)
						margin, cause := backends.ExpiryRace(t, hb, nb, backends.Handover{
							Hold: func(ctx context.Context, st store.Store) (context.Context, error) {
								l, err := election.New(st, p, election.WithDisconnectPolicy(policy)).Campaign(ctx, []byte("old"))
								if err != nil {
									return nil, err
								}
								return l.Context(), nil
							},
							Next: func(ctx context.Context, st store.Store) error {
								_, err := election.New(st, p).Campaign(ctx, []byte("new"))
								return err
							},
							Queued: func(t testing.TB, st store.Store) { waitCandidates(t, st, p, 2) },
						})
						margins[i] = margin
						if margin <= 0 {
							t.Errorf("the frozen leader stopped %v after the next was told it leads; want before", -margin)
						}
						want := store.ErrSessionExpired
						if policy == election.LoseOnDisconnect && errors.Is(cause, election.ErrDisconnected) {
							want = election.ErrDisconnected
						}
						if !errors.Is(cause, want) {
							t.Errorf("cause = %v; want %v", cause, want)
						}
					})
				}
			})
			if !t.Failed() {
				least, median := backends.Margins(margins)
				t.Logf("margin before the next leader over %d runs: least %v, median %v", runs, least, median)
			}
		})
	}
}
