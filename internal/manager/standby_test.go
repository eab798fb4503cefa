package manager_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/controlplane"
	"github.com/hitl-dev/hitl/internal/manager"
)

// A standby replica, which has not won the lease, already has its caches
// synced: when the leader dies, the new one reconciles at once instead of
// first listing every question, reply and claim (the chaos run measured
// 5 s of cache sync in each failover before).
func TestStandbyKeepsItsCacheWarm(t *testing.T) {
	env := controlplane.New()
	cfg, c, err := controlplane.Start(env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	const ns = "hitl-system"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// Someone else leads, for longer than the test.
	now := metav1.NewMicroTime(time.Now())
	if err := c.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hitl-manager.hitl.dev"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("the-leader"), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now},
	}); err != nil {
		t.Fatal(err)
	}
	// A read of a kind no informer serves fails instead of starting one.
	cacheOpts := manager.CacheOptions()
	cacheOpts.ReaderFailOnMissingInformer = true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  hitlv1.NewScheme(),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		LeaderElection:          true,
		LeaderElectionID:        "hitl-manager.hitl.dev",
		LeaderElectionNamespace: ns,
		Cache:                   cacheOpts,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := manager.Setup(mgr, manager.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	for _, list := range []client.ObjectList{&hitlv1.UserQuestionList{}, &hitlv1.QuestionReplyList{}, &hitlv1.QuestionClaimList{}} {
		// A cache read waits until the informer has synced; before the
		// cache itself has started it fails with ErrCacheNotStarted, and
		// is tried again. A kind no informer serves fails at once.
		deadline := time.Now().Add(30 * time.Second)
		for {
			rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
			err := mgr.GetCache().List(rctx, list)
			rcancel()
			var notStarted *cache.ErrCacheNotStarted
			if err == nil {
				break
			}
			if !errors.As(err, &notStarted) || time.Now().After(deadline) {
				t.Fatalf("the standby's cache does not serve %T: %v", list, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	select {
	case <-mgr.Elected():
		t.Fatal("the manager was elected while another replica held the lease")
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
