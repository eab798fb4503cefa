package claimreads

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// FenceName names the manager's fence: a QuestionClaim in the manager's own
// namespace, of a question and an agent of that name, which no question
// has. It holds no window.
const FenceName = "hitl-manager-fence"

// FenceNames are the fence's objects: FenceName and FenceName-1 to -7, one
// for each read that may be in flight at once (claimReadsInFlight), so that
// reads sent together write different objects instead of contending for
// one. Each claims the question FenceName.
var FenceNames = fenceNames()

func fenceNames() []string {
	names := []string{FenceName}
	for i := 1; i < claimReadsInFlight; i++ {
		names = append(names, fmt.Sprintf("%s-%d", FenceName, i))
	}
	return names
}

// fenceWait is how long a read waits for the cache to see its fence write
// before it reads the API server instead.
const fenceWait = 2 * time.Second

// Fence reads the claims from the manager's cache, made current by a
// write: a write to the claims' own resource (the fence) reaches the
// cache's watch after every claim written before it, so once the cache
// has seen the fence, it holds every claim the API server held when the
// write was sent. A consistent list waits for the API server's watch cache
// to catch up with etcd, which for a resource as seldom written as claims
// takes until its next progress request, up to a tenth of a second and
// half that on average; the fence takes a write and a watch event, a few
// milliseconds.
//
// The fence needs the manager's namespaced grants (config/rbac: create and
// patch on questionclaims, verb answer on agents.hitl.dev/hitl-manager-fence
// in its namespace); without them, or when a write fails, the read lists
// the claims from the API server as before.
type Fence struct {
	writer    client.Client
	cache     client.Reader
	namespace string
	free      chan string // the fence objects no read is writing

	mu   sync.Mutex
	seen uint64        // the newest resourceVersion of the fence the cache delivered
	wake chan struct{} // closed and replaced when seen moves
}

// Informer is what the fence needs of the cache's informer of claims.
type Informer interface {
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
}

// NewFence returns the fence in namespace, written by writer and read back
// from cache; informer must be the cache's informer of QuestionClaims.
func NewFence(writer client.Client, cache client.Reader, informer Informer, namespace string) (*Fence, error) {
	f := &Fence{writer: writer, cache: cache, namespace: namespace, free: make(chan string, len(FenceNames)), wake: make(chan struct{})}
	for _, name := range FenceNames {
		f.free <- name
	}
	observe := func(o any) {
		if c, ok := o.(*hitlv1.QuestionClaim); ok && f.Is(c) {
			f.observe(c.ResourceVersion)
		}
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, o any) { observe(o) },
	}); err != nil {
		return nil, fmt.Errorf("watching the claims fence: %w", err)
	}
	return f, nil
}

// Is reports whether c is one of the fence's objects, which claim nothing.
func (f *Fence) Is(c *hitlv1.QuestionClaim) bool {
	return f != nil && c.Namespace == f.namespace && IsFence(c)
}

// IsFence reports whether c has the shape of a manager's fence (callers also
// check its namespace): an object of one of FenceNames claiming the
// question FenceName.
func IsFence(c *hitlv1.QuestionClaim) bool {
	return c.Spec.QuestionRef.Name == FenceName && slices.Contains(FenceNames, c.Name)
}

func (f *Fence) observe(rv string) {
	v, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if v > f.seen {
		f.seen = v
		close(f.wake)
		f.wake = make(chan struct{})
	}
}

// errNotComparable is a resourceVersion that is not a number: the read
// cannot tell when the cache has reached it.
var errNotComparable = errors.New("the API server's resourceVersions are not numbers")

// read writes the fence, waits until the cache has seen the write, and
// returns the claims the cache then holds (the fence left out).
func (f *Fence) read(ctx context.Context) ([]hitlv1.QuestionClaim, error) {
	start := time.Now()
	rv, err := f.write(ctx)
	if err != nil {
		return nil, err
	}
	written := time.Now()
	fenceSeconds.WithLabelValues("write").Observe(written.Sub(start).Seconds())
	want, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return nil, errNotComparable
	}
	timeout := time.NewTimer(fenceWait)
	defer timeout.Stop()
	for {
		f.mu.Lock()
		seen, wake := f.seen, f.wake
		f.mu.Unlock()
		if seen >= want {
			fenceSeconds.WithLabelValues("seen").Observe(time.Since(written).Seconds())
			break
		}
		select {
		case <-wake:
		case <-timeout.C:
			return nil, fmt.Errorf("the cache did not see the claims fence within %s", fenceWait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var list hitlv1.QuestionClaimList
	if err := f.cache.List(ctx, &list); err != nil {
		return nil, err
	}
	claims := list.Items[:0]
	for _, c := range list.Items {
		if !f.Is(&c) {
			claims = append(claims, c)
		}
	}
	return claims, nil
}

// write renews a fence object no other read is writing, creating it when
// it is missing, and returns the resourceVersion of the write.
func (f *Fence) write(ctx context.Context) (string, error) {
	var name string
	select {
	case name = <-f.free:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { f.free <- name }()
	now := metav1.NowMicro()
	c := &hitlv1.QuestionClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.namespace}}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"renewTime":%q}}`, now.Format(metav1.RFC3339Micro)))
	err := f.writer.Patch(ctx, c, patch)
	if apierrors.IsNotFound(err) {
		c.Spec = hitlv1.QuestionClaimSpec{
			QuestionRef:     hitlv1.QuestionReference{Name: FenceName},
			Agent:           FenceName,
			DurationSeconds: 5,
			RenewTime:       &now,
		}
		err = f.writer.Create(ctx, c)
	}
	if err != nil {
		return "", fmt.Errorf("writing the claims fence %s/%s: %w", f.namespace, name, err)
	}
	return c.ResourceVersion, nil
}

// log is the package's logger.
var log = ctrl.Log.WithName("claimreads")
