package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func blockingQuestion(name string) string {
	return `apiVersion: hitl.dev/v1alpha1
kind: UserQuestion
metadata: {name: ` + name + `}
spec:
  agent: bot
  questions:
    - id: q
      question: Ship it?
      options: [{label: "yes"}, {label: "no"}]
`
}

// replyManifest is a reply as a person or a GitOps pipeline applies it with
// kubectl: no labels, and an answeredBy that admission must overwrite.
func replyManifest(name, question, label string) string {
	return `apiVersion: hitl.dev/v1alpha1
kind: QuestionReply
metadata: {name: ` + name + `}
spec:
  questionRef: {name: ` + question + `}
  answeredBy: {username: mallory, groups: ["system:masters"]}
  answers: [{id: q, selected: ["` + label + `"]}]
`
}

// The manager is stopped for the whole of this spec's asking and answering:
// admission is inside the API server, so nothing is refused that would have
// been accepted, identities are still stamped and checked, and when the
// manager is back every reply gets the outcome it would have had, in
// creation order.
var _ = Describe("an outage of the manager", Serial, func() {
	It("keeps asking and answering open, and settles everything as if the manager had run throughout once it is back", func() {
		ns, bot := newNamespace()
		ctx := context.Background()
		// bob may create replies but not answer the agent.
		Expect(adminClient.Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "reply-only", Namespace: ns},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"hitl.dev"}, Resources: []string{"questionreplies"}, Verbs: []string{"create", "get"}}},
		})).To(Succeed())
		bind(ns, "Role", "reply-only", rbacv1.Subject{Kind: "User", APIGroup: rbacv1.GroupName, Name: bob.name})
		waitAllowed(bob.name, authorizationv1.ResourceAttributes{Namespace: ns, Group: "hitl.dev", Resource: "questionreplies", Verb: "create"})

		stopManager()
		DeferCleanup(func() {
			if managerProc == nil {
				startManager()
			}
		})
		create := func(who actor, name, manifest string) run {
			GinkgoHelper()
			return who.kubectl("-n", ns, "create", "-f", writeFile(ns+"-"+name+".yaml", manifest))
		}
		mustCreate := func(who actor, name, manifest string) {
			GinkgoHelper()
			r := create(who, name, manifest)
			Expect(r.code).To(BeZero(), r.stderr)
		}

		By("asking while the manager is down")
		for _, q := range []string{"blocking", "race", "cancel-me", "by-cli"} {
			mustCreate(bot, q, blockingQuestion(q))
		}
		mustCreate(bot, "timed", timedQuestion("timed", "2s"))
		Expect(jsonpath(ns, "uq", `{range .items[*]}{.metadata.labels.hitl\.dev/agent} {end}`)()).To(Equal("bot bot bot bot bot "))
		refused := create(bot, "other", strings.Replace(blockingQuestion("other"), "agent: bot", "agent: other-bot", 1))
		Expect(refused.code).NotTo(BeZero())
		Expect(refused.stderr).To(And(ContainSubstring("AGENT_MISMATCH"), ContainSubstring("spec.agent")))

		By("answering while the manager is down")
		// bob's reply does not name its agent: admission cannot tell, the
		// controller will. Naming it, it is refused at once.
		mustCreate(bob, "bob-1", replyManifest("bob-1", "blocking", "no"))
		labelled := strings.Replace(replyManifest("bob-2", "blocking", "no"), "metadata: {name: bob-2}", "metadata: {name: bob-2, labels: {hitl.dev/agent: bot}}", 1)
		refused = create(bob, "bob-2", labelled)
		Expect(refused.code).NotTo(BeZero())
		Expect(refused.stderr).To(And(ContainSubstring("FORBIDDEN"), ContainSubstring("metadata.labels[hitl.dev/agent]")))
		mustCreate(alice, "alice-1", replyManifest("alice-1", "blocking", "yes"))
		Expect(jsonpath(ns, "qr/alice-1", "{.spec.answeredBy.username} {.metadata.labels.hitl\\.dev/question}")()).To(Equal("alice blocking"))
		Expect(jsonpath(ns, "qr/bob-1", "{.spec.answeredBy.username} {.spec.answeredBy.groups}")()).To(Equal(`bob ["system:authenticated"]`))

		mustCreate(alice, "race-1", replyManifest("race-1", "race", "yes"))
		mustCreate(alice, "race-2", replyManifest("race-2", "race", "no"))

		// The CLI waits for the outcome; it gets it when the manager is back.
		_, waitCLI := alice.background("kubectl", "hitl", "-n", ns, "answer", "by-cli", "--select", "q=yes")

		patched := bot.kubectl("-n", ns, "patch", "uq", "cancel-me", "--type", "merge", "-p", `{"spec":{"cancelled":true}}`)
		Expect(patched.code).To(BeZero(), patched.stderr)

		// A late reply: created after the timed question's deadline passed
		// unseen (its creation time is a whole second).
		created, err := time.Parse(time.RFC3339, jsonpath(ns, "uq/timed", "{.metadata.creationTimestamp}")())
		Expect(err).NotTo(HaveOccurred())
		time.Sleep(time.Until(created.Add(3 * time.Second)))
		mustCreate(alice, "alice-late", replyManifest("alice-late", "timed", "yes"))

		Eventually(jsonpath(ns, "qr", `{range .items[*]}{.metadata.name} {end}`)).Should(ContainSubstring("by-cli-"))
		Consistently(jsonpath(ns, "uq,qr", `{range .items[*]}{.status.state}{.status.outcome}{end}`), "1s").Should(BeEmpty(),
			"nothing decides while the manager is down")

		By("bringing the manager back")
		startManager()
		outcome := func(reply string) func() string {
			return jsonpath(ns, "qr/"+reply, "{.status.outcome} {.status.reason}")
		}
		Eventually(outcome("bob-1")).Should(Equal("Rejected FORBIDDEN"))
		Expect(jsonpath(ns, "qr/bob-1", "{.status.message}")()).To(HavePrefix(`FORBIDDEN: user "bob" may not answer the questions of agent "bot"`))
		Eventually(outcome("alice-1")).Should(Equal("Applied "))
		Expect(jsonpath(ns, "uq/blocking", "{.status.state} {.status.settlement.reply} {.status.settlement.answeredBy.username} {.status.answers[0].selected[0]}")()).
			To(Equal("Settled alice-1 alice yes"))

		Eventually(outcome("race-1")).Should(Equal("Applied "))
		// The race's loser came for a finished question: Closed, final and
		// healthy, not Rejected.
		Eventually(outcome("race-2")).Should(Equal("Closed NOT_ANSWERABLE"))
		Expect(jsonpath(ns, "uq/race", "{.status.settlement.reply}")()).To(Equal("race-1"))

		Eventually(jsonpath(ns, "uq/timed", "{.status.state} {.status.queuedReply.name}")).Should(Equal("Continued alice-late"))
		// The controller writes the question's status first, then the
		// reply's outcome.
		Eventually(outcome("alice-late")).Should(Equal("Queued "))
		continued, err := time.Parse(time.RFC3339Nano, jsonpath(ns, "uq/timed", "{.status.continuedAt}")())
		Expect(err).NotTo(HaveOccurred())
		Expect(continued).To(BeTemporally(">=", created.Add(2*time.Second)), "never Continued before the deadline")

		Eventually(jsonpath(ns, "uq/cancel-me", "{.status.state}")).Should(Equal("Cancelled"))

		answered := waitCLI()
		Expect(answered.code).To(BeZero(), answered.stderr)
		Expect(answered.stdout).To(ContainSubstring("Applied"))
		Expect(jsonpath(ns, "uq/by-cli", "{.status.state} {.status.settlement.answeredBy.username}")()).To(Equal("Settled alice"))

		By("the controller labelled and adopted the replies applied by hand")
		for _, r := range []string{"bob-1", "alice-1", "race-2", "alice-late"} {
			Eventually(jsonpath(ns, "qr/"+r, `{.metadata.labels.hitl\.dev/agent} {.metadata.ownerReferences[0].kind}`)).
				Should(Equal("bot UserQuestion"), fmt.Sprintf("reply %s", r))
		}
	})
})
