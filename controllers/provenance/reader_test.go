package provenance

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// objects is a client.Reader over a set of engine objects that records
// what was read. When both is set, a read of the Kustomization waits
// (up to a second) for a read of its source to start, so that a reader
// that reads them one after the other is seen to.
type objects struct {
	mu    sync.Mutex
	byKey map[string]*unstructured.Unstructured
	reads []string
	both  bool
	// started is closed when a read of a source starts.
	started chan struct{}
	once    sync.Once
	// overlapped is whether the Kustomization's read saw its source's
	// start.
	overlapped bool
}

func newObjects(objs ...*unstructured.Unstructured) *objects {
	o := &objects{byKey: map[string]*unstructured.Unstructured{}, started: make(chan struct{})}
	for _, u := range objs {
		o.byKey[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = u
	}
	return o
}

func (o *objects) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u := obj.(*unstructured.Unstructured)
	kind := u.GetKind()
	id := kind + "/" + key.Namespace + "/" + key.Name
	if kind == KindKustomization && o.both {
		select {
		case <-o.started:
			o.mu.Lock()
			o.overlapped = true
			o.mu.Unlock()
		case <-time.After(time.Second):
		}
	} else if kind != KindKustomization {
		o.once.Do(func() { close(o.started) })
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads = append(o.reads, id)
	stored, ok := o.byKey[id]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: u.GroupVersionKind().Group, Resource: kind}, key.Name)
	}
	stored.DeepCopyInto(u)
	return nil
}

func (o *objects) List(context.Context, client.ObjectList, ...client.ListOption) error {
	panic("the provenance reader lists nothing")
}

func TestReaderReadsTheSourceBesideTheKustomization(t *testing.T) {
	const rev = "main@sha1:abc1230000000000000000000000000000000000"
	tenant := "system:serviceaccount:team-a:answerer"
	engine := hitlv1.EngineReference{Kind: KindKustomization, Namespace: "team-a", Name: "answers"}
	ks, src := object(t, kustomizationYAML), object(t, gitRepositoryYAML)
	other := object(t, gitRepositoryYAML)
	other.SetName("elsewhere")
	unstructured.RemoveNestedField(other.Object, "status", "conditions")
	store := newObjects(ks, src, other)
	rd := NewReader(store)
	of := func(author string) *hitlv1.ReplySource {
		t.Helper()
		got, err := rd.Of(t.Context(), reply(author, fluxMark, nil))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	key := types.NamespacedName{Namespace: engine.Namespace, Name: engine.Name}
	verified := &hitlv1.ReplySource{Engine: engine, Revision: rev, Verified: true}

	// A mark anyone may write: read, no source, nothing remembered.
	if got := of("mallory"); got != nil {
		t.Fatalf("mallory's reply has source %+v", got)
	}
	if _, ok := rd.refs.get(key); ok {
		t.Fatal("a reply whose author is not the engine's made the reader remember its Kustomization")
	}
	// The first reply of the engine's identity: the Kustomization, then
	// the source it names.
	store.reads = nil
	if got := of(tenant); got == nil || *got != *verified {
		t.Fatalf("first reply: source %+v, want %+v", got, verified)
	}
	if want := []string{"Kustomization/team-a/answers", "GitRepository/team-a/decisions"}; !slices.Equal(store.reads, want) {
		t.Fatalf("first reply read %v, want %v", store.reads, want)
	}
	// The next: both at once.
	store.reads, store.both = nil, true
	if got := of(tenant); got == nil || *got != *verified {
		t.Fatalf("second reply: source %+v, want %+v", got, verified)
	}
	if !store.overlapped || len(store.reads) != 2 {
		t.Fatalf("second reply: reads %v, the source's read started during the Kustomization's: %t", store.reads, store.overlapped)
	}
	// The Kustomization now names another source: the one read beside it
	// is not used, the one it names is read after it.
	_ = unstructured.SetNestedField(ks.Object, "elsewhere", "spec", "sourceRef", "name")
	store.reads = nil
	if got, want := of(tenant), (&hitlv1.ReplySource{Engine: engine, Revision: rev}); got == nil || *got != *want {
		t.Fatalf("after the source changed: source %+v, want %+v (the new source verified nothing)", got, want)
	}
	if last := store.reads[len(store.reads)-1]; last != "GitRepository/team-a/elsewhere" {
		t.Fatalf("after the source changed, reads %v: the new source is not read last", store.reads)
	}
	if ref, _ := rd.refs.get(key); ref.Name != "elsewhere" {
		t.Fatalf("remembered source %+v, want elsewhere", ref)
	}
}
