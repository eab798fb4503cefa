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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// Reader reads the engines' objects to complete a reply's source.
type Reader struct {
	// Client reads Kustomizations, GitRepositories (and Flux's other
	// sources) and Applications, around any cache.
	Client client.Reader
}

// Of is the source of reply r: nil when r carries no engine's mark, when
// the engine's object is missing or unreadable, or when r's author is not
// the identity that engine applies as. Errors are only those worth a
// retry (the API server unreachable); a missing kind or a denied read is
// no source.
func (rd Reader) Of(ctx context.Context, r *hitlv1.QuestionReply) (*hitlv1.ReplySource, error) {
	engine := EngineOf(r)
	if engine == nil || rd.Client == nil {
		return nil, nil
	}
	gvk := kustomizationGVK
	if engine.Kind == KindApplication {
		gvk = applicationGVK
	}
	obj, err := rd.get(ctx, gvk, engine.Namespace, engine.Name)
	if obj == nil || err != nil {
		return nil, err
	}
	if engine.Kind == KindApplication {
		return ArgoSource(r, obj), nil
	}
	var src *unstructured.Unstructured
	if ref, found, _ := unstructured.NestedStringMap(obj.Object, "spec", "sourceRef"); found && ref["kind"] != "" && ref["name"] != "" {
		ns := ref["namespace"]
		if ns == "" {
			ns = engine.Namespace
		}
		if src, err = rd.get(ctx, schema.GroupVersionKind{Group: sourceGroup, Version: "v1", Kind: ref["kind"]}, ns, ref["name"]); err != nil {
			return nil, err
		}
	}
	return FluxSource(r, obj, src), nil
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
