package provenance

import (
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// The identities the engines apply as when nothing else is configured:
// Flux's kustomize-controller and Argo CD's application controller, each
// the ServiceAccount of that name (in whatever namespace it runs).
const (
	fluxController = "kustomize-controller"
	argoController = "argocd-application-controller"
)

// FluxSource is the source of reply r applied by Kustomization ks from
// source src (its GitRepository, OCIRepository or Bucket; nil when it
// could not be read), or nil when r's author is not the identity ks
// applies as: its spec.serviceAccountName in its namespace, or, without
// one, Flux's kustomize-controller.
//
// The revision is ks's status.lastAttemptedRevision, which
// kustomize-controller writes before it applies: exact unless ks started
// applying a newer revision before the reply was judged (with an interval
// shorter than the controller's lag, or two commits in quick succession).
// Verified is true only when the source's artifact is at that revision and
// its SourceVerified condition is True.
func FluxSource(r *hitlv1.QuestionReply, ks, src *unstructured.Unstructured) *hitlv1.ReplySource {
	sa, _, _ := unstructured.NestedString(ks.Object, "spec", "serviceAccountName")
	author := authorOf(r)
	if sa != "" && author != "system:serviceaccount:"+ks.GetNamespace()+":"+sa {
		return nil
	}
	if sa == "" && !isServiceAccountNamed(author, fluxController) {
		return nil
	}
	out := &hitlv1.ReplySource{Engine: hitlv1.EngineReference{Kind: KindKustomization, Namespace: ks.GetNamespace(), Name: ks.GetName()}}
	out.Revision = firstString(ks, []string{"status", "lastAttemptedRevision"}, []string{"status", "lastAppliedRevision"})
	if src != nil && out.Revision != "" {
		at, _, _ := unstructured.NestedString(src.Object, "status", "artifact", "revision")
		out.Verified = at == out.Revision && conditionTrue(src, "SourceVerified")
	}
	return out
}

// ArgoSource is the source of reply r applied by Application app, or nil
// when r's author is not Argo CD's application controller. The revision is
// that of the sync under way, else of the last sync. Argo CD keeps no
// record of a commit's signature check on the Application (it refuses to
// sync an unsigned commit when the project requires signatures), so
// Verified stays false.
func ArgoSource(r *hitlv1.QuestionReply, app *unstructured.Unstructured) *hitlv1.ReplySource {
	if !isServiceAccountNamed(authorOf(r), argoController) {
		return nil
	}
	return &hitlv1.ReplySource{
		Engine: hitlv1.EngineReference{Kind: KindApplication, Namespace: app.GetNamespace(), Name: app.GetName()},
		Revision: firstString(app,
			[]string{"status", "operationState", "operation", "sync", "revision"},
			[]string{"status", "operationState", "syncResult", "revision"},
			[]string{"status", "sync", "revision"}),
	}
}

func authorOf(r *hitlv1.QuestionReply) string {
	if r.Spec.AnsweredBy == nil {
		return ""
	}
	return r.Spec.AnsweredBy.Username
}

// isServiceAccountNamed reports whether username is a ServiceAccount of
// that name, in any namespace.
func isServiceAccountNamed(username, name string) bool {
	rest, ok := strings.CutPrefix(username, "system:serviceaccount:")
	if !ok {
		return false
	}
	_, sa, ok := strings.Cut(rest, ":")
	return ok && sa == name
}

// firstString is the first of the fields that holds a non-empty string.
func firstString(u *unstructured.Unstructured, fields ...[]string) string {
	for _, f := range fields {
		if s, _, _ := unstructured.NestedString(u.Object, f...); s != "" {
			return s
		}
	}
	return ""
}

// conditionTrue reports whether u's status has the condition True.
func conditionTrue(u *unstructured.Unstructured, condition string) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == condition {
			return m["status"] == "True"
		}
	}
	return false
}
