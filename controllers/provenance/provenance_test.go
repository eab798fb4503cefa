package provenance

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// A Kustomization as kustomize-controller leaves it while it applies
// revision abc123 of its GitRepository, impersonating the tenant's
// ServiceAccount.
const kustomizationYAML = `
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: answers, namespace: team-a}
spec:
  interval: 1m
  path: ./answers
  prune: true
  serviceAccountName: answerer
  sourceRef: {kind: GitRepository, name: decisions}
status:
  lastAppliedRevision: main@sha1:0000000000000000000000000000000000000000
  lastAttemptedRevision: main@sha1:abc1230000000000000000000000000000000000
  conditions:
  - {type: Reconciling, status: "True", reason: Progressing, message: "Building manifests for revision main@sha1:abc1230000000000000000000000000000000000"}
`

// The GitRepository as source-controller writes it when it verified the
// commit's signature.
const gitRepositoryYAML = `
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: decisions, namespace: team-a}
spec:
  url: https://git.example/decisions.git
  verify: {mode: HEAD, secretRef: {name: pgp-keys}}
status:
  artifact:
    revision: main@sha1:abc1230000000000000000000000000000000000
    digest: sha256:0000
  conditions:
  - {type: Ready, status: "True", reason: Succeeded}
  - {type: SourceVerified, status: "True", reason: Succeeded, message: "verified signature of commit abc123"}
`

// An Application as Argo CD's application controller leaves it while it
// syncs revision def456.
const applicationYAML = `
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: answers, namespace: argocd}
spec:
  destination: {namespace: team-a, server: https://kubernetes.default.svc}
  source: {repoURL: https://git.example/decisions.git, path: answers, targetRevision: main}
status:
  sync: {status: OutOfSync, revision: "0000000"}
  operationState:
    phase: Running
    operation: {sync: {revision: def4560000000000000000000000000000000000}}
`

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func reply(author string, labels, annotations map[string]string) *hitlv1.QuestionReply {
	r := &hitlv1.QuestionReply{}
	r.Name, r.Namespace = "ship-alice", "team-a"
	r.Labels, r.Annotations = labels, annotations
	if author != "" {
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: author}
	}
	return r
}

var fluxMark = map[string]string{FluxNameLabel: "answers", FluxNamespaceLabel: "team-a"}

func TestEngineOf(t *testing.T) {
	argo := func(id string) map[string]string { return map[string]string{ArgoTrackingAnnotation: id} }
	cases := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        *hitlv1.EngineReference
	}{
		{name: "no mark", want: nil},
		{name: "Flux's labels", labels: fluxMark, want: &hitlv1.EngineReference{Kind: KindKustomization, Namespace: "team-a", Name: "answers"}},
		{name: "Flux's name without its namespace", labels: map[string]string{FluxNameLabel: "answers"}, want: nil},
		{name: "Argo CD's tracking id", annotations: argo("answers:hitl.dev/QuestionReply:team-a/ship-alice"),
			want: &hitlv1.EngineReference{Kind: KindApplication, Namespace: ArgoNamespace, Name: "answers"}},
		{name: "Argo CD's tracking id of an Application in another namespace", annotations: argo("apps_answers:hitl.dev/QuestionReply:team-a/ship-alice"),
			want: &hitlv1.EngineReference{Kind: KindApplication, Namespace: "apps", Name: "answers"}},
		{name: "a tracking id copied from another object", annotations: argo("answers:hitl.dev/QuestionReply:team-a/ship-bob"), want: nil},
		{name: "a tracking id of another kind", annotations: argo("answers:/ConfigMap:team-a/ship-alice"), want: nil},
		{name: "a malformed tracking id", annotations: argo("answers"), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EngineOf(reply("", tc.labels, tc.annotations))
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("EngineOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestFluxSource(t *testing.T) {
	const rev = "main@sha1:abc1230000000000000000000000000000000000"
	tenant := "system:serviceaccount:team-a:answerer"
	unverified := func(t *testing.T) *unstructured.Unstructured {
		src := object(t, gitRepositoryYAML)
		_ = unstructured.SetNestedSlice(src.Object, []any{map[string]any{"type": "Ready", "status": "True"}}, "status", "conditions")
		return src
	}
	moved := func(t *testing.T) *unstructured.Unstructured {
		src := object(t, gitRepositoryYAML)
		_ = unstructured.SetNestedField(src.Object, "main@sha1:fff0000000000000000000000000000000000000", "status", "artifact", "revision")
		return src
	}
	noSA := func(t *testing.T) *unstructured.Unstructured {
		ks := object(t, kustomizationYAML)
		unstructured.RemoveNestedField(ks.Object, "spec", "serviceAccountName")
		return ks
	}
	engine := hitlv1.EngineReference{Kind: KindKustomization, Namespace: "team-a", Name: "answers"}
	cases := []struct {
		name   string
		author string
		ks     func(*testing.T) *unstructured.Unstructured
		src    func(*testing.T) *unstructured.Unstructured
		want   *hitlv1.ReplySource
	}{
		{"applied by the tenant's ServiceAccount from a verified commit", tenant, nil, nil,
			&hitlv1.ReplySource{Engine: engine, Revision: rev, Verified: true}},
		{"a source that did not verify the signature", tenant, nil, unverified, &hitlv1.ReplySource{Engine: engine, Revision: rev}},
		{"a source already at another revision: not known to be verified", tenant, nil, moved, &hitlv1.ReplySource{Engine: engine, Revision: rev}},
		{"a source that could not be read", tenant, nil, func(*testing.T) *unstructured.Unstructured { return nil }, &hitlv1.ReplySource{Engine: engine, Revision: rev}},
		{"created by a person wearing Flux's labels", "mallory", nil, nil, nil},
		{"created by another ServiceAccount of the namespace", "system:serviceaccount:team-a:other", nil, nil, nil},
		{"the tenant's ServiceAccount name in another namespace", "system:serviceaccount:team-b:answerer", nil, nil, nil},
		{"no author", "", nil, nil, nil},
		{"without impersonation: Flux's own controller", "system:serviceaccount:flux-system:kustomize-controller", noSA, nil,
			&hitlv1.ReplySource{Engine: engine, Revision: rev, Verified: true}},
		{"without impersonation: anyone else", tenant, noSA, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ks, src := object(t, kustomizationYAML), object(t, gitRepositoryYAML)
			if tc.ks != nil {
				ks = tc.ks(t)
			}
			if tc.src != nil {
				src = tc.src(t)
			}
			got := FluxSource(reply(tc.author, fluxMark, nil), ks, src)
			if (got == nil) != (tc.want == nil) || (got != nil && *got != *tc.want) {
				t.Errorf("FluxSource = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestArgoSource(t *testing.T) {
	app := object(t, applicationYAML)
	engine := hitlv1.EngineReference{Kind: KindApplication, Namespace: "argocd", Name: "answers"}
	got := ArgoSource(reply("system:serviceaccount:argocd:argocd-application-controller", nil, nil), app)
	want := &hitlv1.ReplySource{Engine: engine, Revision: "def4560000000000000000000000000000000000"}
	if got == nil || *got != *want {
		t.Errorf("during a sync: ArgoSource = %+v, want %+v", got, want)
	}
	unstructured.RemoveNestedField(app.Object, "status", "operationState")
	if got := ArgoSource(reply("system:serviceaccount:argocd:argocd-application-controller", nil, nil), app); got == nil || got.Revision != "0000000" {
		t.Errorf("after the sync: ArgoSource = %+v, want the synced revision 0000000", got)
	}
	if got := ArgoSource(reply("alice", nil, nil), app); got != nil {
		t.Errorf("a person's reply with Argo CD's mark: ArgoSource = %+v, want nil", got)
	}
}
