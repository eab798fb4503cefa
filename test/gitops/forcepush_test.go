package gitops

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// testForcePushBeforeApply: a reply commit that is force-pushed away
// before Flux applies it answers nothing. To make "before Flux applies
// it" certain rather than a race with the GitRepository's 2s poll, the
// Kustomization is suspended (as `flux suspend kustomization` does) and
// the test waits until kustomize-controller has seen that; source-
// controller keeps fetching, so the test sees the reply commit become
// the artifact and then the force-push replace it, and only then resumes
// the Kustomization, which applies what the branch holds now.
func testForcePushBeforeApply(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	team := newTenant(ctx, t, w, "team-d", "hitl-gitops-answerer")
	ask(ctx, t, w, "release-bot", "canary", nil)

	team.suspend(ctx, t, true)
	g.Eventually(func() (int64, error) {
		ks, err := team.kustomization(ctx)
		observed, _, _ := unstructured.NestedInt64(ks.Object, "status", "observedGeneration")
		return observed - ks.GetGeneration(), err
	}).Should(BeZero(), "kustomize-controller has seen the suspension")

	reply := team.answer(t, "canary", "env=prod")
	sha := team.repo.commit("Answer canary")
	team.repo.push()
	g.Eventually(team.sourceRevision(ctx)).Should(Equal(revision(sha)), "source-controller fetches the reply commit")
	team.repo.git("reset", "--quiet", "--hard", team.first)
	team.repo.git("push", "--quiet", "--force", "origin", "main")
	g.Eventually(team.sourceRevision(ctx)).Should(Equal(revision(team.first)), "source-controller fetches the force-pushed branch")

	team.suspend(ctx, t, false)
	g.Eventually(team.applied(ctx)).Should(Equal(revision(team.first)), "the resumed Kustomization applies the branch as it is now")
	ks, err := team.kustomization(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	attempted, _, _ := unstructured.NestedString(ks.Object, "status", "lastAttemptedRevision")
	g.Expect(attempted).To(Equal(revision(team.first)), "the reply commit was never attempted")
	g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: reply}, &hitlv1.QuestionReply{})).To(Satisfy(apierrors.IsNotFound))
	q := &hitlv1.UserQuestion{}
	g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: "canary"}, q)).To(Succeed())
	g.Expect(q.Status.State).To(Equal(hitlv1.StateOpen), "nothing settles")
}
