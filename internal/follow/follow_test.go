package follow

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// These are unit tests of the mechanism on controller-runtime's fake
// client; the SDK suites run it against a real API server, with watches
// that expire and drop.

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := hitlv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func question(name, agent string) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-1"),
		Labels: map[string]string{hitlv1.AgentLabel: agent}}}
}

func byAgent(agent string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{hitlv1.AgentLabel: agent})
}

func next(t *testing.T, s *Stream) Event {
	t.Helper()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatalf("the stream ended: %v", s.Err())
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

func TestInitialListThenChanges(t *testing.T) {
	// The fake client's watch starts from now, whatever version it is
	// asked for: a change made before the Reflector opens it, just after
	// Start returns, would never arrive (a real API server sends it).
	watching := make(chan struct{}, 1)
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).
		WithObjects(question("b", "bot"), question("a", "bot"), question("other", "someone")).Build(), interceptor.Funcs{
		Watch: func(ctx context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
			w, err := cl.Watch(ctx, list, opts...)
			select {
			case watching <- struct{}{}:
			default:
			}
			return w, err
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := Start(ctx, Options{Client: c, Namespace: "ns", Labels: byAgent("bot")})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range s.Initial {
		names = append(names, q.Name)
	}
	if len(names) != 2 || names[0] != "a" || names[1] != "b" {
		t.Fatalf("initial list %v, want [a b] (the server's order, only the selected agent)", names)
	}

	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream never watched")
	}
	// (The fake client's watches ignore label selectors; the SDK suites
	// show, against a real API server, that other agents' questions never
	// arrive.)
	if err := c.Create(ctx, question("c", "bot")); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, s); ev.Type != watch.Added || ev.Question.Name != "c" {
		t.Fatalf("got %s %s, want ADDED c", ev.Type, ev.Question.Name)
	}
	q := question("a", "bot")
	if err := c.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	q.Status.State = hitlv1.StateSettled
	if err := c.Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, s); ev.Type != watch.Modified || ev.Question.Status.State != hitlv1.StateSettled {
		t.Fatalf("got %s %s %s, want MODIFIED a Settled", ev.Type, ev.Question.Name, ev.Question.Status.State)
	}
	// The receiver owns what it gets.
	s.Initial[0].Name = "changed"
	if err := c.Delete(ctx, question("b", "bot")); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, s); ev.Type != watch.Deleted || ev.Question.Name != "b" {
		t.Fatalf("got %s %s, want DELETED b", ev.Type, ev.Question.Name)
	}

	cancel()
	for range s.Events() {
	}
	if s.Err() != nil {
		t.Errorf("a stream whose context ended reports %v", s.Err())
	}
}

func TestTheFirstListsErrorIsStarts(t *testing.T) {
	forbidden := apierrors.NewForbidden(hitlv1.GroupVersion.WithResource("userquestions").GroupResource(), "", errors.New("no RBAC"))
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return forbidden
		},
	})
	for _, stop := range []bool{false, true} {
		s, err := Start(context.Background(), Options{Client: c, Namespace: "ns", Labels: byAgent("bot"), StopOnRefusal: stop})
		if s != nil || !apierrors.IsForbidden(err) {
			t.Errorf("StopOnRefusal %v: Start = %v, %v; want the list's Forbidden", stop, s, err)
		}
	}
}

func TestARefusedWatchEndsTheStreamOnlyWhenAsked(t *testing.T) {
	gone := apierrors.NewUnauthorized("the token expired")
	// Every watch is refused, once the test lets it be.
	release := make(chan struct{})
	watches := make(chan struct{}, 100)
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(question("a", "bot")).Build(), interceptor.Funcs{
		Watch: func(ctx context.Context, _ client.WithWatch, _ client.ObjectList, _ ...client.ListOption) (watch.Interface, error) {
			watches <- struct{}{}
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return nil, gone
		},
	})

	s, err := Start(context.Background(), Options{Client: c, Namespace: "ns", Labels: byAgent("bot"), StopOnRefusal: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Initial) != 1 {
		t.Fatalf("initial list %d questions, want 1", len(s.Initial))
	}
	close(release)
	select {
	case _, open := <-s.Events():
		if open {
			t.Fatal("an event from a refused watch")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a refused watch did not end the stream")
	}
	if !apierrors.IsUnauthorized(s.Err()) {
		t.Errorf("Err() = %v, want the refusal", s.Err())
	}

	// Without StopOnRefusal the stream retries, with backoff, until its
	// context ends.
	for len(watches) > 0 {
		<-watches
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err = Start(ctx, Options{Client: c, Namespace: "ns", Labels: byAgent("bot")})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case <-watches:
		case <-time.After(10 * time.Second):
			t.Fatal("the stream does not watch again")
		}
	}
	select {
	case <-s.Events():
		t.Fatal("the stream ended although it retries")
	default:
	}
	cancel()
	for range s.Events() {
	}
	if s.Err() != nil {
		t.Errorf("Err() = %v after the context ended", s.Err())
	}
}

func TestStartEndsWithItsContext(t *testing.T) {
	block := make(chan struct{})
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).Build(), interceptor.Funcs{
		List: func(ctx context.Context, _ client.WithWatch, _ client.ObjectList, _ ...client.ListOption) error {
			select {
			case <-block:
			case <-ctx.Done():
			}
			return ctx.Err()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	defer close(block)
	if _, err := Start(ctx, Options{Client: c, Namespace: "ns", Labels: byAgent("bot")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start = %v, want the context's end", err)
	}
}

// The Reflector lists in pages (500 objects each, then the continue token);
// the options must reach the API server as it set them.
func TestListsArePaged(t *testing.T) {
	var first *client.ListOptions
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(question("a", "bot")).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if first == nil {
				first = (&client.ListOptions{}).ApplyOptions(o)
				first.AsListOptions()
			}
			return c.List(ctx, l, o...)
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := Start(ctx, Options{Client: c, Namespace: "ns", Labels: byAgent("bot")}); err != nil {
		t.Fatal(err)
	}
	raw := first.Raw
	if raw.Limit != 500 || raw.ResourceVersion != "" || raw.LabelSelector != "hitl.dev/agent=bot" || first.Namespace != "ns" {
		t.Errorf("the first list asked for limit %d, resourceVersion %q, labels %q in %q; want 500, a consistent read, the agent's label, ns",
			raw.Limit, raw.ResourceVersion, raw.LabelSelector, first.Namespace)
	}
}
