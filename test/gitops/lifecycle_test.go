package gitops

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// testTTLWithFileInGit: a question with ttlSecondsAfterFinished: 10 settles
// by commit; the controller then deletes it with its reply, while the
// reply file stays in Git. Flux's next reconciliation creates the reply
// again: it is Closed (NOT_ANSWERABLE), settles nothing, and leaves the
// Kustomization healthy, and the reconciliations after it change nothing.
func testTTLWithFileInGit(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	team := newTenant(ctx, t, w, "team-ttl", "hitl-gitops-answerer")
	// The TTL outlasts Flux's health check of the reply (wait: true polls
	// every 5 s): a reply deleted while the engine still waits for it to
	// be healthy times its Kustomization out (docs/gitops.md).
	ask(ctx, t, w, "release-bot", "cleanup", ptr.To[int32](10))
	name := team.answer(t, "cleanup", "env=staging")
	sha := team.repo.commit("Answer cleanup")
	pushed := time.Now()
	team.repo.push()
	applied, settled := waitSettled(ctx, t, w, "cleanup", name, pushed)
	t.Logf("git push to the reply applied: %s; applied to Settled (hitl): %s", applied.Round(time.Millisecond), (settled - applied).Round(time.Millisecond))
	// The controller writes the reply's outcome after the question's
	// status.
	g.Eventually(func() hitlv1.ReplyOutcome { return reply(ctx, t, w, name).Status.Outcome }).Should(Equal(hitlv1.OutcomeApplied))
	first := reply(ctx, t, w, name)
	g.Expect(first.Status.Source).NotTo(BeNil())
	g.Expect(first.Status.Source.Revision).To(Equal(revision(sha)))
	g.Eventually(team.applied(ctx)).Should(Equal(revision(sha)), "the Kustomization is Ready at the commit, its health check passed")

	g.Eventually(func() error {
		return w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: "cleanup"}, &hitlv1.UserQuestion{})
	}).Should(Satisfy(apierrors.IsNotFound), "the controller deletes the question after its TTL")
	g.Eventually(func() error {
		return w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: name}, &hitlv1.QuestionReply{})
	}).Should(Satisfy(apierrors.IsNotFound), "and its reply")
	t.Logf("git push to the question and reply deleted: %s", time.Since(pushed).Round(time.Millisecond))
	g.Eventually(team.applied(ctx)).Should(Equal(revision(sha)), "the Kustomization is Ready at the commit")

	ks := team.reconcile(ctx, t)
	g.Expect(conditions(ks)).To(ContainSubstring("Ready=True"), "the Kustomization stays Ready with the reply created again")
	// kstatus reads a reply the controller has not judged yet as Current
	// (it has no status), so the reconciliation may end before it is.
	g.Eventually(func() hitlv1.ReplyOutcome { return reply(ctx, t, w, name).Status.Outcome }).Should(Equal(hitlv1.OutcomeClosed))
	g.Eventually(func() []corev1.Event { return eventsOf(ctx, t, w, reply(ctx, t, w, name).UID) }).ShouldNot(BeEmpty(), "the controller records why it closed the reply")
	again := reply(ctx, t, w, name)
	g.Expect(again.UID).NotTo(Equal(first.UID), "Flux created the reply again from Git")
	g.Expect(again.Status.Reason).To(Equal(hitlv1.CodeNotAnswerable))
	g.Expect(again.Status.ObservedGeneration).To(Equal(again.Generation))
	g.Expect(again.Status.Conditions).To(ContainElement(And(
		HaveField("Type", "Ready"), HaveField("Status", BeEquivalentTo("True")), HaveField("Reason", "Closed"))))
	g.Expect(again.Status.Conditions).NotTo(ContainElement(HaveField("Type", "Stalled")))
	events := eventsOf(ctx, t, w, again.UID)
	t.Logf("the reply created again: %s %s %q; %d Events", again.Status.Outcome, again.Status.Reason, again.Status.Message, len(events))

	for i := range 2 {
		ks := team.reconcile(ctx, t)
		g.Expect(conditions(ks)).To(And(ContainSubstring("Ready=True"), ContainSubstring("Healthy=True")), "reconciliation %d", i+1)
		rev, _, _ := unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
		g.Expect(rev).To(Equal(revision(sha)))
	}
	after := reply(ctx, t, w, name)
	g.Expect(after.UID).To(Equal(again.UID))
	g.Expect(after.ResourceVersion).To(Equal(again.ResourceVersion), "two reconciliations leave the Closed reply as it was")
	g.Expect(eventsOf(ctx, t, w, again.UID)).To(HaveLen(len(events)), "and record no new Event")
	g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: "cleanup"}, &hitlv1.UserQuestion{})).
		To(Satisfy(apierrors.IsNotFound), "nothing settles or comes back")
	warnings := &corev1.EventList{}
	g.Expect(w.admin.List(ctx, warnings, client.InNamespace(team.ns), client.MatchingFields{"type": corev1.EventTypeWarning})).To(Succeed())
	g.Expect(warnings.Items).To(BeEmpty(), "kustomize-controller reported no failure")
}

// testReapplyAndPrune: while a settled question's reply is in Git,
// reconciliations apply it unchanged and write nothing; a commit that
// deletes the file prunes the reply, and the question stays Settled with
// the same settlement.
func testReapplyAndPrune(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	team := newTenant(ctx, t, w, "team-c", "hitl-gitops-answerer")
	ask(ctx, t, w, "release-bot", "hotfix", nil)
	name := team.answer(t, "hotfix", "env=staging")
	sha := team.repo.commit("Answer hotfix")
	pushed := time.Now()
	team.repo.push()
	waitSettled(ctx, t, w, "hotfix", name, pushed)
	g.Eventually(team.applied(ctx)).Should(Equal(revision(sha)))
	g.Eventually(func() hitlv1.ReplyOutcome { return reply(ctx, t, w, name).Status.Outcome }).Should(Equal(hitlv1.OutcomeApplied))
	before := reply(ctx, t, w, name)
	settled := question(ctx, t, w, "hotfix")

	for i := range 2 {
		ks := team.reconcile(ctx, t)
		g.Expect(conditions(ks)).To(And(ContainSubstring("Ready=True"), ContainSubstring("Healthy=True")), "reconciliation %d", i+1)
		g.Expect(reply(ctx, t, w, name).ResourceVersion).To(Equal(before.ResourceVersion), "reconciliation %d applies the reply unchanged", i+1)
	}

	team.repo.git("rm", "--quiet", "answers/hotfix.yaml")
	removed := team.repo.commit("Remove the answer to hotfix")
	pushed = time.Now()
	team.repo.push()
	g.Eventually(func() error {
		return w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: name}, &hitlv1.QuestionReply{})
	}).Should(Satisfy(apierrors.IsNotFound), "Flux prunes the reply")
	t.Logf("git push to the reply pruned: %s", time.Since(pushed).Round(time.Millisecond))
	g.Eventually(team.applied(ctx)).Should(Equal(revision(removed)))
	after := question(ctx, t, w, "hotfix")
	g.Expect(after.Status.State).To(Equal(hitlv1.StateSettled))
	g.Expect(after.Status.Settlement).To(Equal(settled.Status.Settlement), "pruning the reply undoes nothing")
	g.Expect(after.Status.Answers).To(Equal(settled.Status.Answers))
}

// reply reads a reply of the agents' namespace.
func reply(ctx context.Context, t *testing.T, w *world, name string) *hitlv1.QuestionReply {
	t.Helper()
	r := &hitlv1.QuestionReply{}
	if err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: name}, r); err != nil {
		t.Fatal(err)
	}
	return r
}

// question reads a question of the agents' namespace.
func question(ctx context.Context, t *testing.T, w *world, name string) *hitlv1.UserQuestion {
	t.Helper()
	q := &hitlv1.UserQuestion{}
	if err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: name}, q); err != nil {
		t.Fatal(err)
	}
	return q
}

// eventsOf lists the Events about the object with uid in the agents'
// namespace.
func eventsOf(ctx context.Context, t *testing.T, w *world, uid types.UID) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	if err := w.admin.List(ctx, list, client.InNamespace(agents)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.UID == uid {
			out = append(out, e)
		}
	}
	return out
}
