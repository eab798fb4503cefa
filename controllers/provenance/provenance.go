// Package provenance tells where a QuestionReply came from when a GitOps
// engine applied it: the engine's object (a Flux Kustomization or an Argo
// CD Application), the revision it was applying, and whether the commit's
// signature was verified.
//
// The engines mark what they apply: Flux's kustomize-controller labels
// every object with its Kustomization's name and namespace, and Argo CD
// annotates it with its tracking id. Anyone who may create a reply may
// write those marks too, so a mark alone proves nothing: the reply's
// author, stamped by the API server, must be the identity the engine
// applies as (the Kustomization's ServiceAccount, Flux's own
// kustomize-controller, Argo CD's application controller). A reply whose
// mark and author disagree has no source.
package provenance

import (
	"context"
	"fmt"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The marks the engines set on what they apply.
const (
	// FluxNameLabel and FluxNamespaceLabel name the Kustomization that
	// applied an object.
	FluxNameLabel      = "kustomize.toolkit.fluxcd.io/name"
	FluxNamespaceLabel = "kustomize.toolkit.fluxcd.io/namespace"
	// ArgoTrackingAnnotation is Argo CD's tracking id:
	// "<application>:<group>/<kind>:<namespace>/<name>", the application
	// written "<namespace>_<name>" when it lives outside Argo CD's own
	// namespace.
	ArgoTrackingAnnotation = "argocd.argoproj.io/tracking-id"
)

// Engine kinds, as EngineReference.Kind.
const (
	KindKustomization = "Kustomization"
	KindApplication   = "Application"
)

// Group versions the reader reads the engines' objects at.
var (
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: KindKustomization}
	applicationGVK   = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: KindApplication}
	sourceGroup      = "source.toolkit.fluxcd.io"
)

// ArgoNamespace is the namespace of Argo CD's Applications whose tracking
// id names no namespace: Argo CD's own, "argocd" in its default install.
const ArgoNamespace = "argocd"

// EngineOf reads the engine's mark on a reply: the Kustomization or
// Application that says it applied it, or nil. An Argo CD tracking id
// that names another object (copied from one) is no mark.
func EngineOf(r *hitlv1.QuestionReply) *hitlv1.EngineReference {
	if name, ns := r.Labels[FluxNameLabel], r.Labels[FluxNamespaceLabel]; name != "" && ns != "" {
		return &hitlv1.EngineReference{Kind: KindKustomization, Namespace: ns, Name: name}
	}
	id := r.Annotations[ArgoTrackingAnnotation]
	app, resource, ok := strings.Cut(id, ":")
	if !ok || app == "" {
		return nil
	}
	want := fmt.Sprintf("%s/%s:%s/%s", hitlv1.GroupVersion.Group, "QuestionReply", r.Namespace, r.Name)
	if resource != want {
		return nil
	}
	ns, name, qualified := strings.Cut(app, "_")
	if !qualified {
		ns, name = ArgoNamespace, app
	}
	if ns == "" || name == "" {
		return nil
	}
	return &hitlv1.EngineReference{Kind: KindApplication, Namespace: ns, Name: name}
}

// Reader reads the engines' objects to complete a reply's source. Make
// one with NewReader.
type Reader struct {
	// Client reads Kustomizations, GitRepositories (and Flux's other
	// sources) and Applications, around any cache.
	Client client.Reader
	// refs remembers the source each Kustomization named when it last
	// applied a reply, so that the next reply's Kustomization and source
	// are read at once instead of one after the other.
	refs *sourceRefs
}

// NewReader is a Reader that reads with c.
func NewReader(c client.Reader) Reader {
	return Reader{Client: c, refs: &sourceRefs{byKustomization: map[types.NamespacedName]sourceRef{}}}
}

// Of is the source of reply r: nil when r carries no engine's mark, when
// the engine's object is missing or unreadable, or when r's author is not
// the identity that engine applies as. Errors are only those worth a
// retry (the API server unreachable); a missing kind or a denied read is
// no source.
//
// A Kustomization and its source are both read fresh for every reply, so
// the revision and the signature check are those of the moment: the
// source is read beside the Kustomization when the Kustomization named it
// last time, and read again after it when the Kustomization now names
// another.
func (rd Reader) Of(ctx context.Context, r *hitlv1.QuestionReply) (*hitlv1.ReplySource, error) {
	engine := EngineOf(r)
	if engine == nil || rd.Client == nil {
		return nil, nil
	}
	if engine.Kind == KindApplication {
		app, err := rd.get(ctx, applicationGVK, engine.Namespace, engine.Name)
		if app == nil || err != nil {
			return nil, err
		}
		return ArgoSource(r, app), nil
	}
	key := types.NamespacedName{Namespace: engine.Namespace, Name: engine.Name}
	guess, guessed := rd.refs.get(key)
	var (
		guessedSrc *unstructured.Unstructured
		guessErr   error
		done       = make(chan struct{})
	)
	if guessed {
		go func() {
			defer close(done)
			guessedSrc, guessErr = rd.get(ctx, guess.gvk(), guess.Namespace, guess.Name)
		}()
	} else {
		close(done)
	}
	ks, err := rd.get(ctx, kustomizationGVK, engine.Namespace, engine.Name)
	<-done
	if ks == nil || err != nil {
		return nil, err
	}
	ref, named := sourceRefOf(ks)
	var src *unstructured.Unstructured
	switch {
	case !named:
	case guessed && ref == guess:
		if src, err = guessedSrc, guessErr; err != nil {
			return nil, err
		}
	default:
		if src, err = rd.get(ctx, ref.gvk(), ref.Namespace, ref.Name); err != nil {
			return nil, err
		}
	}
	out := FluxSource(r, ks, src)
	// Only a Kustomization whose own identity applied the reply is
	// remembered: marks anyone may write never grow the memory.
	if out != nil && named {
		rd.refs.put(key, ref)
	}
	return out, nil
}

// sourceRef is a Kustomization's spec.sourceRef, its namespace filled in.
type sourceRef struct {
	Kind, Namespace, Name string
}

func (s sourceRef) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: sourceGroup, Version: "v1", Kind: s.Kind}
}

// sourceRefOf reads ks's spec.sourceRef; false when it names none.
func sourceRefOf(ks *unstructured.Unstructured) (sourceRef, bool) {
	ref, found, _ := unstructured.NestedStringMap(ks.Object, "spec", "sourceRef")
	if !found || ref["kind"] == "" || ref["name"] == "" {
		return sourceRef{}, false
	}
	ns := ref["namespace"]
	if ns == "" {
		ns = ks.GetNamespace()
	}
	return sourceRef{Kind: ref["kind"], Namespace: ns, Name: ref["name"]}, true
}

// sourceRefs is the memory of Reader.refs.
type sourceRefs struct {
	mu              sync.Mutex
	byKustomization map[types.NamespacedName]sourceRef
}

func (m *sourceRefs) get(key types.NamespacedName) (sourceRef, bool) {
	if m == nil {
		return sourceRef{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	ref, ok := m.byKustomization[key]
	return ref, ok
}

func (m *sourceRefs) put(key types.NamespacedName, ref sourceRef) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.byKustomization[key] = ref
}

// get reads one object; nil, nil when it, or its kind, does not exist or
// may not be read.
func (rd Reader) get(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	err := rd.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
	switch {
	case err == nil:
		return u, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err), meta.IsNoMatchError(err), apierrors.IsMethodNotSupported(err):
		return nil, nil
	}
	return nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, ns, name, err)
}
