package gitops

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// testAnotherTenantRefused: team-b may answer office-bot only
// (hitl-gitops-answerer copied with its resourceNames replaced, as
// docs/tenancy.md has operators do per team). A reply to release-bot's
// question pushed to team-b's repository is refused at admission with
// hitl's FORBIDDEN, the question stays Open, and team-b's Kustomization
// says why.
func testAnotherTenantRefused(ctx context.Context, t *testing.T, w *world) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(time.Minute)
	g.SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	role := shippedRole(t, "hitl_gitops_answerer.yaml")
	role.Name = "hitl-gitops-answerer-office-bot"
	replaced := 0
	for i, r := range role.Rules {
		if slices.Contains(r.Resources, "agents") {
			role.Rules[i].ResourceNames = []string{"office-bot"}
			replaced++
		}
	}
	g.Expect(replaced).To(Equal(1), "hitl-gitops-answerer names its agents in one rule")
	g.Expect(w.admin.Create(ctx, role)).To(Succeed())
	team := newTenant(ctx, t, w, "team-b", role.Name)

	ask(ctx, t, w, "release-bot", "rollout", nil)
	reply := team.answer(t, "rollout", "env=prod")
	sha := team.repo.commit("Answer rollout for release-bot, which team-b does not answer")
	pushed := time.Now()
	team.repo.push()
	g.Eventually(team.applied(ctx)).Should(And(HavePrefix("not Ready: "), ContainSubstring("FORBIDDEN: user "+team.username()+
		" may not answer the questions of agent release-bot")), "kustomize-controller reports hitl's refusal")
	t.Logf("git push to the Kustomization reporting FORBIDDEN: %s", time.Since(pushed).Round(time.Millisecond))

	ks, err := team.kustomization(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	attempted, _, _ := unstructured.NestedString(ks.Object, "status", "lastAttemptedRevision")
	g.Expect(attempted).To(Equal(revision(sha)))
	status, message := condition(ks, "Ready")
	g.Expect(status).To(Equal("False"))
	t.Logf("the Kustomization's Ready condition: %s", message)
	g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: reply}, &hitlv1.QuestionReply{})).
		To(Satisfy(apierrors.IsNotFound), "admission refused the reply")
	q := &hitlv1.UserQuestion{}
	g.Expect(w.admin.Get(ctx, client.ObjectKey{Namespace: agents, Name: "rollout"}, q)).To(Succeed())
	g.Expect(q.State()).To(Equal(hitlv1.StateOpen))
}
