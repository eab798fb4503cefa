package gitops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// testRejectedReplyTurnsTheEngineRed: a reply file whose answer the
// controller rejects (an option the question does not have: BAD_ANSWER,
// which admission cannot see without the question) leaves the
// Kustomization not Ready. The reply reads as in progress to Flux's health
// check from its creation (status.observedGeneration 0) until the
// controller has judged it, so the check never passes before the
// rejection.
func testRejectedReplyTurnsTheEngineRed(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	team := newTenant(ctx, t, w, "team-red", "hitl-gitops-answerer")
	ask(ctx, t, w, "release-bot", "moonshot", nil)
	name := team.answer(t, "moonshot", "env=prod")
	file := filepath.Join(team.repo.dir, "answers", "moonshot.yaml")
	data, err := os.ReadFile(file)
	g.Expect(err).NotTo(HaveOccurred())
	edited := strings.Replace(string(data), "- prod", "- moon", 1)
	g.Expect(edited).NotTo(Equal(string(data)), "the reply file selects prod")
	g.Expect(os.WriteFile(file, []byte(edited), 0o644)).To(Succeed())
	team.repo.commit("Answer moonshot with an option it does not have")
	team.repo.push()

	g.Eventually(func() (hitlv1.ReplyOutcome, error) {
		r := &hitlv1.QuestionReply{}
		err := w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: name}, r)
		return r.Status.Outcome, err
	}).Should(Equal(hitlv1.OutcomeRejected), "Flux applies the reply, and the controller rejects it")
	g.Expect(reply(ctx, t, w, name).Status.Reason).To(Equal(hitlv1.CodeBadAnswer))
	g.Eventually(team.applied(ctx)).Should(And(HavePrefix("not Ready: "), ContainSubstring("QuestionReply/"+agents+"/"+name)),
		"the health check fails on the rejected reply")
	g.Consistently(team.applied(ctx), "2s", "100ms").Should(HavePrefix("not Ready: "), "and never passes")
	g.Expect(question(ctx, t, w, "moonshot").State()).To(Equal(hitlv1.StateOpen))
}
