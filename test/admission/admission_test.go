package admission_test

import (
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// admissionCase is one row of the table: it plays in a fresh namespace of
// a cluster of each mode it names (every mode when it names none), and
// expects what that mode does.
type admissionCase struct {
	name  string
	modes []testenv.Admission
	run   func(s *scene)
}

func (c admissionCase) in(mode testenv.Admission) bool {
	return len(c.modes) == 0 || slices.Contains(c.modes, mode)
}

// The mutating side of each mode, for the cases whose outcome depends on
// it: in webhook mode the defaulting webhook labels a reply with its
// question's agent at admission, so the reply-identity policy checks the
// author against that agent at once; with the mutating policies the agent
// label is only what the client set, and a reply without it is checked by
// the feedback webhook where there is one, and by the controller in any
// case.
func webhookMode(s *scene) bool { return s.mode == testenv.WebhookMode }

// feedback reports whether the validating reply webhook runs (in feedback
// and in webhook mode).
func feedback(s *scene) bool { return s.mode.Webhooks() }

// askingCases: who may ask as an agent (SPEC §3), the agent label, and the
// largest timeout.
var askingCases = []admissionCase{
	{name: "the agent's own ServiceAccount asks as it, and the agent label is set", run: func(s *scene) {
		coder := s.serviceAccount(s.ns, "coder", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "coder"))
		s.awaitAllowed(coder, mayAsk)
		s.expectDenied(coder, mayAskAs("coder")) // it needs no grant

		q := s.question("coder")
		Expect(coder.Create(ctx, q)).To(Succeed())
		stored := s.storedQuestion(q.Name)
		Expect(stored.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "coder"))
		Expect(stored.Spec.Agent).To(Equal("coder"))
		if webhookMode(s) {
			Expect(stored.Spec.AskedAt).NotTo(BeNil(), "the defaulting webhook stamps spec.askedAt")
		}
	}},

	{name: "another ServiceAccount of the namespace asks as the agent only with the ask grant", run: func(s *scene) {
		other := s.serviceAccount(s.ns, "other", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "other"))
		s.awaitAllowed(other, mayAsk)
		s.expectDenied(other, mayAskAs("coder"))

		refusedByPolicy(other.Create(ctx, s.question("coder")), "question-identity", hitlv1.CodeAgentMismatch, "(spec.agent)",
			"user system:serviceaccount:"+s.ns+":other may not ask as agent coder")

		s.grantAgents(serviceAccountSubject(s.ns, "other"), hitlv1.VerbAsk, "coder")
		s.awaitAllowed(other, mayAskAs("coder"))
		q := s.question("coder")
		Expect(other.Create(ctx, q)).To(Succeed())
		Expect(s.storedQuestion(q.Name).Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "coder"))
	}},

	{name: "the agent's namesake ServiceAccount of another namespace may not ask as it", run: func(s *scene) {
		home := s.namespace()
		coder := s.serviceAccount(home, "coder", nil)
		// It may create questions in the scene's namespace, and in its own.
		s.bind(agentRole, serviceAccountSubject(home, "coder"))
		s.bindIn(home, agentRole, serviceAccountSubject(home, "coder"))
		s.awaitAllowed(coder, mayAsk)
		s.expectDenied(coder, mayAskAs("coder"))

		refusedByPolicy(coder.Create(ctx, s.question("coder")), "question-identity", hitlv1.CodeAgentMismatch, "(spec.agent)",
			"user system:serviceaccount:"+home+":coder may not ask as agent coder", "in namespace "+s.ns)

		// At home it is the agent.
		awaitAllowedIn(home, coder, mayAsk)
		q := s.question("coder")
		q.Namespace = home
		Expect(coder.Create(ctx, q)).To(Succeed())
	}},

	{name: "a ServiceAccount's hitl.dev/agent annotation grants nothing", run: func(s *scene) {
		runner := s.serviceAccount(s.ns, "runner", map[string]string{hitlv1.AgentLabel: "coder"})
		s.bind(agentRole, serviceAccountSubject(s.ns, "runner"))
		s.awaitAllowed(runner, mayAsk)

		refusedByPolicy(runner.Create(ctx, s.question("coder")), "question-identity", hitlv1.CodeAgentMismatch, "(spec.agent)",
			"user system:serviceaccount:"+s.ns+":runner may not ask as agent coder")
		// It asks as its own name.
		Expect(runner.Create(ctx, s.question("runner"))).To(Succeed())
	}},

	{name: "a user bound to hitl-agent asks as release-bot, and not as coder", run: func(s *scene) {
		carol := s.user("carol", "agent-operators")
		s.bind(agentRole, userSubject("carol"))
		s.awaitAllowed(carol, mayAsk, mayAskAs("release-bot"))
		s.expectDenied(carol, mayAskAs("coder"))

		q := s.question("release-bot")
		Expect(carol.Create(ctx, q)).To(Succeed())
		Expect(s.storedQuestion(q.Name).Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "release-bot"))

		refusedByPolicy(carol.Create(ctx, s.question("coder")), "question-identity", hitlv1.CodeAgentMismatch, "(spec.agent)",
			"user carol may not ask as agent coder")
	}},

	{name: "an agent label that conflicts with spec.agent is refused, on creation and on update", run: func(s *scene) {
		coder := s.serviceAccount(s.ns, "coder", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "coder"))
		s.awaitAllowed(coder, mayAsk)

		q := s.question("coder")
		q.Labels = map[string]string{hitlv1.AgentLabel: "release-bot"}
		refusedByPolicy(coder.Create(ctx, q), "question-identity", hitlv1.CodeAgentMismatch, "(metadata.labels)",
			"label hitl.dev/agent=release-bot", "conflicts with spec.agent coder")

		q = s.question("coder")
		Expect(coder.Create(ctx, q)).To(Succeed())

		// A dropped label is set again on update. (The controller writes
		// the question's status meanwhile: an update retries on a
		// conflict, as any client's does.)
		update := func(change func(*hitlv1.UserQuestion)) error {
			var err error
			_ = retry.RetryOnConflict(retry.DefaultRetry, func() error {
				fresh := s.storedQuestion(q.Name)
				change(fresh)
				err = coder.Update(ctx, fresh)
				return err
			})
			return err
		}
		Expect(update(func(q *hitlv1.UserQuestion) { delete(q.Labels, hitlv1.AgentLabel) })).To(Succeed())
		Expect(s.storedQuestion(q.Name).Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "coder"))

		// Relabelling to another agent is not, by update or by patch.
		refusedByPolicy(update(func(q *hitlv1.UserQuestion) { q.Labels[hitlv1.AgentLabel] = "release-bot" }),
			"question-identity", hitlv1.CodeAgentMismatch, "(metadata.labels)",
			"label hitl.dev/agent=release-bot", "conflicts with spec.agent coder")
		relabelled := s.storedQuestion(q.Name)
		patch := client.MergeFrom(relabelled.DeepCopy())
		relabelled.Labels[hitlv1.AgentLabel] = "release-bot"
		refusedByPolicy(coder.Patch(ctx, relabelled, patch), "question-identity", hitlv1.CodeAgentMismatch, "(metadata.labels)",
			"label hitl.dev/agent=release-bot", "conflicts with spec.agent coder")
		Expect(s.storedQuestion(q.Name).Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "coder"))
	}},

	{name: "a timeout above the maximum is refused with BAD_TIMEOUT", run: func(s *scene) {
		coder := s.serviceAccount(s.ns, "coder", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "coder"))
		s.awaitAllowed(coder, mayAsk)

		long := s.question("coder")
		long.Spec.Timeout = &metav1.Duration{Duration: 24*time.Hour + time.Millisecond}
		refusedByPolicy(coder.Create(ctx, long), "question-timeout", hitlv1.CodeBadTimeout, "(spec.timeout)", "above the maximum of 24h")

		longest := s.question("coder")
		longest.Spec.Timeout = &metav1.Duration{Duration: 24 * time.Hour}
		Expect(coder.Create(ctx, longest)).To(Succeed())
	}},

	{name: "the largest timeout follows the admission ConfigMap, without a restart", modes: []testenv.Admission{testenv.Policies}, run: func(s *scene) {
		coder := s.serviceAccount(s.ns, "coder", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "coder"))
		s.awaitAllowed(coder, mayAsk)
		twoHours := func() *hitlv1.UserQuestion {
			q := s.question("coder")
			q.Spec.Timeout = &metav1.Duration{Duration: 2 * time.Hour}
			return q
		}
		Expect(coder.Create(ctx, twoHours())).To(Succeed())

		setMaxTimeout(s, "1h")
		DeferCleanup(func() {
			setMaxTimeout(s, "24h")
			Eventually(func() error { return coder.Create(ctx, twoHours(), client.DryRunAll) }).Should(Succeed())
		})
		Eventually(func() error { return coder.Create(ctx, twoHours(), client.DryRunAll) }).Should(HaveOccurred())
		refusedByPolicy(coder.Create(ctx, twoHours()), "question-timeout", hitlv1.CodeBadTimeout, "(spec.timeout)", "above the maximum of 1h")
		hour := s.question("coder")
		hour.Spec.Timeout = &metav1.Duration{Duration: time.Hour}
		Expect(coder.Create(ctx, hour)).To(Succeed())
	}},
}

// setMaxTimeout edits maxTimeout in the admission policies' parameter
// ConfigMap, as an operator would.
func setMaxTimeout(s *scene, value string) {
	GinkgoHelper()
	install, err := testenv.DefaultInstall()
	Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{}
	Expect(s.admin.Get(ctx, client.ObjectKey{Namespace: install.Namespace, Name: install.NamePrefix + "admission"}, cm)).To(Succeed())
	patch := client.MergeFrom(cm.DeepCopy())
	cm.Data["maxTimeout"] = value
	Expect(s.admin.Patch(ctx, cm, patch)).To(Succeed())
}

// answeringCases: a reply's stamped author, who may answer (SPEC §3), a
// reply that names another agent, and a reply to a settled question.
var answeringCases = []admissionCase{
	{name: "a forged spec.answeredBy is replaced by the requesting user", run: func(s *scene) {
		bot := s.serviceAccount(s.ns, "release-bot", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "release-bot"))
		alice := s.user("alice", "answerers")
		s.bind(answererRole, userSubject("alice"))
		s.awaitAllowed(bot, mayAsk)
		s.awaitAllowed(alice, mayReply, mayAnswerAs("release-bot"))

		q := s.question("release-bot")
		Expect(bot.Create(ctx, q)).To(Succeed())
		r := s.reply(q)
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: "mallory", UID: "uid-mallory", Groups: []string{"system:masters"}}
		Expect(alice.Create(ctx, r)).To(Succeed())

		alicesIdentity := &hitlv1.UserInfo{Username: "alice", Groups: []string{"answerers", "system:authenticated"}}
		Expect(s.storedReply(r.Name).Spec.AnsweredBy).To(Equal(alicesIdentity))
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
		Expect(s.storedQuestion(q.Name).Status.Settlement.AnsweredBy).To(Equal(alicesIdentity))
	}},

	{name: "a ServiceAccount's reply is stamped with its token's identity", run: func(s *scene) {
		bot := s.serviceAccount(s.ns, "release-bot", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "release-bot"))
		inbox := s.serviceAccount(s.ns, "inbox", nil)
		s.bind(answererRole, serviceAccountSubject(s.ns, "inbox"))
		s.awaitAllowed(bot, mayAsk)
		s.awaitAllowed(inbox, mayReply, mayAnswerAs("release-bot"))
		sa := &corev1.ServiceAccount{}
		Expect(s.admin.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "inbox"}, sa)).To(Succeed())

		q := s.question("release-bot")
		Expect(bot.Create(ctx, q)).To(Succeed())
		r := s.reply(q)
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: "system:serviceaccount:" + s.ns + ":release-bot"}
		Expect(inbox.Create(ctx, r)).To(Succeed())
		by := s.storedReply(r.Name).Spec.AnsweredBy
		Expect(by.Username).To(Equal("system:serviceaccount:" + s.ns + ":inbox"))
		Expect(by.UID).To(Equal(string(sa.UID)))
		Expect(by.Groups).To(ConsistOf("system:serviceaccounts", "system:serviceaccounts:"+s.ns, "system:authenticated"))
	}},

	{name: "a reply by a user without the answer grant never settles anything", run: func(s *scene) {
		coder := s.serviceAccount(s.ns, "coder", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "coder"))
		// eve may reply (hitl-answerer), but answer only release-bot and
		// office-bot, not coder.
		eve := s.user("eve")
		s.bind(answererRole, userSubject("eve"))
		s.awaitAllowed(coder, mayAsk)
		s.awaitAllowed(eve, mayReply)
		s.expectDenied(eve, mayAnswerAs("coder"))

		q := s.question("coder")
		Expect(coder.Create(ctx, q)).To(Succeed())

		// Naming the agent, as kubectl hitl does: refused at admission.
		refusedByPolicy(eve.Create(ctx, labelled(s.reply(q), "coder")), "reply-identity", hitlv1.CodeForbidden,
			"(metadata.labels[hitl.dev/agent])", "user eve may not answer the questions of agent coder")

		// Without the label, by hand.
		r := s.reply(q)
		err := eve.Create(ctx, r)
		switch {
		case webhookMode(s):
			// The defaulting webhook labels it: the policy refuses it.
			refusedByPolicy(err, "reply-identity", hitlv1.CodeForbidden,
				"(metadata.labels[hitl.dev/agent])", "user eve may not answer the questions of agent coder")
		case feedback(s):
			refusedByWebhook(err, hitlv1.CodeForbidden, `user "eve" may not answer the questions of agent "coder"`)
		default:
			// Admitted, and rejected by the controller before it can
			// settle the question.
			Expect(err).NotTo(HaveOccurred())
			s.expectRejected(r.Name, hitlv1.CodeForbidden, `user "eve" may not answer the questions of agent "coder"`)
			// The controller labels the reply after it wrote its outcome.
			Eventually(func() map[string]string { return s.storedReply(r.Name).Labels }).Should(HaveKeyWithValue(hitlv1.AgentLabel, "coder"))
		}
		s.staysOpen(q.Name)

		// The question is still answerable, by someone who may.
		alice := s.user("alice")
		s.bind(answererRole, userSubject("alice"))
		s.grantAgents(userSubject("alice"), hitlv1.VerbAnswer, "coder")
		s.awaitAllowed(alice, mayReply, mayAnswerAs("coder"))
		ok := s.reply(q)
		Expect(alice.Create(ctx, ok)).To(Succeed())
		Expect(s.outcome(ok.Name).Outcome).To(Equal(hitlv1.OutcomeApplied))
		settled := s.storedQuestion(q.Name)
		Expect(settled.Status.State).To(Equal(hitlv1.StateSettled))
		Expect(settled.Status.Settlement.Reply).To(Equal(ok.Name))
	}},

	{name: "a user bound to hitl-answerer answers a release-bot question", run: func(s *scene) {
		carol := s.user("carol")
		s.bind(agentRole, userSubject("carol"))
		alice := s.user("alice", "answerers")
		s.bind(answererRole, userSubject("alice"))
		s.awaitAllowed(carol, mayAsk, mayAskAs("release-bot"))
		s.awaitAllowed(alice, mayReply, mayAnswerAs("release-bot"))

		q := s.question("release-bot")
		Expect(carol.Create(ctx, q)).To(Succeed())
		r := s.reply(q)
		Expect(alice.Create(ctx, r)).To(Succeed())
		Expect(s.outcome(r.Name).Outcome).To(Equal(hitlv1.OutcomeApplied))
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
		settled := s.storedQuestion(q.Name)
		Expect(settled.Status.Settlement.Reply).To(Equal(r.Name))
		Expect(settled.Status.Settlement.AnsweredBy.Username).To(Equal("alice"))
		Expect(settled.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))
		// Labelled at admission or by the controller, and owned.
		Eventually(func(g Gomega) {
			stored := &hitlv1.QuestionReply{}
			g.Expect(s.admin.Get(ctx, client.ObjectKeyFromObject(r), stored)).To(Succeed())
			g.Expect(stored.Labels).To(Equal(map[string]string{hitlv1.AgentLabel: "release-bot", hitlv1.QuestionLabel: q.Name}))
			g.Expect(stored.OwnerReferences).To(ContainElement(HaveField("UID", settled.UID)))
		}).Should(Succeed())
	}},

	{name: "a reply whose agent label names another agent than its question's", run: func(s *scene) {
		bot := s.serviceAccount(s.ns, "release-bot", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "release-bot"))
		alice := s.user("alice")
		s.bind(answererRole, userSubject("alice"))
		s.awaitAllowed(bot, mayAsk)
		s.awaitAllowed(alice, mayReply, mayAnswerAs("release-bot"), mayAnswerAs("office-bot"))
		s.expectDenied(alice, mayAnswerAs("coder"))

		q := s.question("release-bot")
		Expect(bot.Create(ctx, q)).To(Succeed())

		// An agent she may not answer: refused at admission.
		refusedByPolicy(alice.Create(ctx, labelled(s.reply(q), "coder")), "reply-identity", hitlv1.CodeForbidden,
			"(metadata.labels[hitl.dev/agent])", "user alice may not answer the questions of agent coder")

		// One she may answer, but not this question's.
		r := labelled(s.reply(q), "office-bot")
		err := alice.Create(ctx, r)
		if feedback(s) {
			refusedByWebhook(err, hitlv1.CodeAgentMismatch, "(metadata.labels)", `label hitl.dev/agent="office-bot"`, `question `+q.Name+`'s "release-bot"`)
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectRejected(r.Name, hitlv1.CodeAgentMismatch, `label hitl.dev/agent="office-bot" (metadata.labels) names another agent than question `+q.Name+`'s "release-bot"`)
			Expect(s.storedReply(r.Name).Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "office-bot"))
		}
		s.staysOpen(q.Name)
	}},

	{name: "a reply to a settled question is not answerable", run: func(s *scene) {
		bot := s.serviceAccount(s.ns, "release-bot", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "release-bot"))
		alice := s.user("alice")
		s.bind(answererRole, userSubject("alice"))
		s.awaitAllowed(bot, mayAsk)
		s.awaitAllowed(alice, mayReply, mayAnswerAs("release-bot"))

		q := s.question("release-bot")
		Expect(bot.Create(ctx, q)).To(Succeed())
		first := labelled(s.reply(q), "release-bot")
		Expect(alice.Create(ctx, first)).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))

		again := labelled(s.reply(q), "release-bot")
		again.Spec.Answers = []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}
		if feedback(s) {
			// The webhook reads the question from the manager's cache,
			// which may not hold the settlement read above yet.
			Eventually(func() error { return alice.Create(ctx, again.DeepCopy(), client.DryRunAll) }).Should(HaveOccurred(),
				"the webhook never refused a reply to the settled question")
		}
		err := alice.Create(ctx, again)
		if feedback(s) {
			refusedByWebhook(err, hitlv1.CodeNotAnswerable, "question "+q.Name+" is Settled")
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectClosed(again.Name, q.Name)
		}
		settled := s.storedQuestion(q.Name)
		Expect(settled.Status.Settlement.Reply).To(Equal(first.Name))
		Expect(settled.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}))
	}},
}

// The one table, run in a cluster of each mode.
var _ = Describe("Admission", func() {
	for _, mode := range modes {
		var entries []TableEntry
		for _, c := range append(append(append([]admissionCase{}, askingCases...), answeringCases...), tenancyCases...) {
			if c.in(mode) {
				entries = append(entries, Entry(c.name, c))
			}
		}
		Describe("in "+mode.String()+" mode", func() {
			DescribeTable("admission cases", func(c admissionCase) {
				c.run(clusters[mode].newScene())
			}, entries)
		})
	}
})
