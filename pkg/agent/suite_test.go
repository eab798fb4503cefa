package agent_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/manager"
	"github.com/hitl-dev/hitl/test/testenv"
)

// This suite runs the agent SDK against a real kube-apiserver with hitl's
// webhooks and the real controller, served as the manager serves them. The
// admin client plays the answerer.
func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Agent SDK suite")
}

// maxTimeout is the manager's --max-timeout in this suite: below the SDK's
// own bound, so that the webhook's BAD_TIMEOUT can be seen.
const maxTimeout = time.Hour

var (
	env     *envtest.Environment
	cfg     *rest.Config
	admin   client.WithWatch
	ctx     = context.Background()
	cluster *testenv.Cluster
)

var _ = BeforeSuite(func() {
	testenv.SuiteDefaults()

	var err error
	cluster, err = testenv.StartCluster(manager.DefaultConfig(), testenv.Options{MaxTimeout: maxTimeout})
	Expect(err).NotTo(HaveOccurred())
	env, cfg, admin = cluster.Env, cluster.Config, cluster.Client
})

var _ = AfterSuite(func() {
	if cluster != nil {
		Expect(cluster.Stop()).To(Succeed())
	}
})

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "agent-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// flakyClient is a client whose watches a test can break the way the API
// server breaks them: expire makes every open watch report 410 Gone (its
// resourceVersion is too old), drop closes them (the request timeout).
type flakyClient struct {
	client.WithWatch
	lists, watches atomic.Int32

	mu   sync.Mutex
	open []*flakyWatch
}

func (f *flakyClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	f.lists.Add(1)
	return f.WithWatch.List(ctx, list, opts...)
}

func (f *flakyClient) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	inner, err := f.WithWatch.Watch(ctx, list, opts...)
	if err != nil {
		return nil, err
	}
	w := &flakyWatch{inner: inner, out: make(chan watch.Event), brk: make(chan *watch.Event, 1), stop: make(chan struct{})}
	go w.run()
	f.mu.Lock()
	defer f.mu.Unlock()
	// Counted once it can be broken, so a test that saw the count can break it.
	f.open = append(f.open, w)
	f.watches.Add(1)
	return w, nil
}

// expire ends every open watch with the error event of an expired resourceVersion.
func (f *flakyClient) expire() {
	f.breakAll(&watch.Event{Type: watch.Error, Object: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired,
		Message: "too old resource version",
	}})
}

// drop closes every open watch.
func (f *flakyClient) drop() { f.breakAll(nil) }

func (f *flakyClient) breakAll(ev *watch.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.open {
		w.brk <- ev
	}
	f.open = nil
}

// flakyWatch passes a real watch's events on until it is broken.
type flakyWatch struct {
	inner watch.Interface
	out   chan watch.Event
	brk   chan *watch.Event
	stop  chan struct{}
	once  sync.Once
}

func (w *flakyWatch) run() {
	defer close(w.out)
	defer w.inner.Stop()
	for {
		select {
		case ev, ok := <-w.inner.ResultChan():
			if !ok {
				return
			}
			select {
			case w.out <- ev:
			case <-w.stop:
				return
			}
		case ev := <-w.brk:
			if ev != nil {
				select {
				case w.out <- *ev:
				case <-w.stop:
				}
			}
			return
		case <-w.stop:
			return
		}
	}
}

func (w *flakyWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *flakyWatch) ResultChan() <-chan watch.Event { return w.out }

// staleClient reads questions with a stale status.queuedReply (the one it
// was given) but the current resourceVersion, and may not read replies: an
// agent whose read raced a withdrawal in a way the resourceVersion does not
// show, so that only the API server's own rule can refuse the admission.
type staleClient struct {
	client.WithWatch
	queued *hitlv1.QueuedReply
}

func (s *staleClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*hitlv1.QuestionReply); ok {
		return apierrors.NewForbidden(hitlv1.GroupVersion.WithResource("questionreplies").GroupResource(), key.Name, errors.New("the agent may not read replies"))
	}
	if err := s.WithWatch.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if q, ok := obj.(*hitlv1.UserQuestion); ok {
		q.Status.QueuedReply = s.queued.DeepCopy()
	}
	return nil
}
