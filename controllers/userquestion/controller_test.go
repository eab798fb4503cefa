package userquestion_test

import (
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
)

func question(ns, name string) func() *hitlv1.UserQuestion {
	return func() *hitlv1.UserQuestion {
		q := &hitlv1.UserQuestion{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, q)).To(Succeed())
		return q
	}
}

func state(ns, name string) func() hitlv1.QuestionState {
	get := question(ns, name)
	return func() hitlv1.QuestionState { return get().Status.State }
}

func reply(ns, name string) func() hitlv1.QuestionReplyStatus {
	return func() hitlv1.QuestionReplyStatus {
		r := &hitlv1.QuestionReply{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, r)).To(Succeed())
		return r.Status
	}
}

func outcome(ns, name string) func() hitlv1.ReplyOutcome {
	get := reply(ns, name)
	return func() hitlv1.ReplyOutcome { return get().Outcome }
}

// update changes a question as its agent would: read, change, write, again
// on a conflict with a status the controller wrote meanwhile.
func update(ns, name string, change func(*hitlv1.UserQuestion)) {
	GinkgoHelper()
	Eventually(func() error {
		q := question(ns, name)()
		change(q)
		return k8s.Update(ctx, q)
	}).Should(Succeed())
}

// events counts the events with the given reason about the named object.
func events(ns, name, reason string) func() int {
	return func() int {
		var list eventsv1.EventList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		n := 0
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				n++
				if e.DeprecatedCount > 1 {
					n += int(e.DeprecatedCount) - 1
				}
				if e.Series != nil {
					n += int(e.Series.Count) - 1
				}
			}
		}
		return n
	}
}

// claim is a claim by holder on a question of agent "bot" (the builders'
// default), with its holder stamped as admission would: this suite runs
// without admission.
func claim(ns, name, questionName, holder string, seconds int32) *hitlv1.QuestionClaim {
	return &hitlv1.QuestionClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: hitlv1.QuestionClaimSpec{QuestionRef: hitlv1.QuestionReference{Name: questionName}, Agent: "bot",
			Holder: &hitlv1.UserInfo{Username: holder, Groups: []string{AuthenticatedGroup}}, DurationSeconds: seconds,
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
}

var _ = Describe("A blocking question", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("settles in window with the reply's batch, once", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Ask("env", "Where?", "staging", "prod").Ask("notes", "Notes?").Obj())).To(Succeed())
		Eventually(state(ns, "deploy")).Should(Equal(hitlv1.StateOpen))
		q := question(ns, "deploy")()
		Expect(q.Status.Deadline).To(BeNil())
		Expect(q.Status.QuestionCount).To(BeEquivalentTo(2))
		Expect(meta.IsStatusConditionTrue(q.Status.Conditions, hitlv1.ConditionReconciling)).To(BeTrue())

		Consistently(state(ns, "deploy"), "1500ms").Should(Equal(hitlv1.StateOpen), "a blocking question never times out")

		Expect(k8s.Create(ctx, Reply("alice", ns, "deploy").Select("env", "staging").Custom("notes", "ship it").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(state(ns, "deploy")).Should(Equal(hitlv1.StateSettled))
		q = question(ns, "deploy")()
		Expect(q.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}, {ID: "notes", Custom: "ship it"}}))
		Expect(q.Status.Settlement.Reply).To(Equal("alice"))
		Expect(q.Status.Settlement.Late).To(BeFalse())
		Expect(q.Status.Settlement.AnsweredBy.Username).To(Equal("alice"))
		Expect(meta.IsStatusConditionTrue(q.Status.Conditions, hitlv1.ConditionReady)).To(BeTrue())
		Expect(q.Status.ObservedGeneration).To(Equal(q.Generation))

		Eventually(outcome(ns, "alice")).Should(Equal(hitlv1.OutcomeApplied))
		Eventually(events(ns, "deploy", "Settled")).Should(Equal(1))

		By("a second reply to the settled question is Closed, NOT_ANSWERABLE, and changes nothing")
		Expect(k8s.Create(ctx, Reply("bob", ns, "deploy").Select("env", "prod").Skip("notes").Obj())).To(Succeed())
		Eventually(outcome(ns, "bob")).Should(Equal(hitlv1.OutcomeClosed))
		Expect(reply(ns, "bob")().Reason).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(reply(ns, "bob")().Message).To(HavePrefix("NOT_ANSWERABLE: question deploy is Settled"))
		Eventually(events(ns, "bob", string(hitlv1.CodeNotAnswerable))).Should(Equal(1))
		st := reply(ns, "bob")()
		Expect(meta.IsStatusConditionTrue(st.Conditions, hitlv1.ConditionReady)).To(BeTrue(), "closed is final and healthy")
		Expect(meta.FindStatusCondition(st.Conditions, hitlv1.ConditionStalled)).To(BeNil())
		Expect(question(ns, "deploy")().Status.Settlement.Reply).To(Equal("alice"))
		Consistently(events(ns, "deploy", "Settled"), "500ms").Should(Equal(1))
	})

	It("rejects a bad batch with BAD_ANSWER naming the question id, and stays Open", func() {
		Expect(k8s.Create(ctx, Question("pick", ns).Ask("color", "Which?", "red", "blue").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("both", ns, "pick").Select("color", "red", "blue").Obj())).To(Succeed())
		Eventually(outcome(ns, "both")).Should(Equal(hitlv1.OutcomeRejected))
		st := reply(ns, "both")()
		Expect(st.Reason).To(Equal(hitlv1.CodeBadAnswer))
		Expect(st.Message).To(HavePrefix("BAD_ANSWER: question color: the question is single-select"))
		Expect(meta.IsStatusConditionTrue(st.Conditions, hitlv1.ConditionStalled)).To(BeTrue())
		Expect(state(ns, "pick")()).To(Equal(hitlv1.StateOpen))
	})

	It("closes a reply to a missing question with NOT_ANSWERABLE", func() {
		Expect(k8s.Create(ctx, Reply("lost", ns, "nobody-asked").Custom("q", "hello").Obj())).To(Succeed())
		Eventually(outcome(ns, "lost")).Should(Equal(hitlv1.OutcomeClosed))
		Expect(reply(ns, "lost")().Message).To(Equal("NOT_ANSWERABLE: question nobody-asked (spec.questionRef.name) does not exist"))
	})

	It("is Cancelled when the agent cancels, and later replies are Closed, NOT_ANSWERABLE", func() {
		Expect(k8s.Create(ctx, Question("c", ns).Ask("q", "Q?").Obj())).To(Succeed())
		Eventually(state(ns, "c")).Should(Equal(hitlv1.StateOpen))
		update(ns, "c", func(q *hitlv1.UserQuestion) { q.Spec.Cancelled = true })
		Eventually(state(ns, "c")).Should(Equal(hitlv1.StateCancelled))
		Expect(meta.IsStatusConditionTrue(question(ns, "c")().Status.Conditions, hitlv1.ConditionStalled)).To(BeTrue())
		Eventually(events(ns, "c", "Cancelled")).Should(Equal(1))
		Expect(k8s.Create(ctx, Reply("late", ns, "c").Custom("q", "too late").Obj())).To(Succeed())
		Eventually(outcome(ns, "late")).Should(Equal(hitlv1.OutcomeClosed))
		Expect(reply(ns, "late")().Reason).To(Equal(hitlv1.CodeNotAnswerable))
	})
})

// Admission may be missing (not installed, or a reply that does not name
// its agent): the controller checks every new reply's author against its
// question's agent before the reply can settle or queue anything.
var _ = Describe("A reply's author", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	// unauthorized is a reply by a user outside the group the suite lets
	// answer every agent.
	unauthorized := func(name, question string) *hitlv1.QuestionReply {
		r := Reply(name, ns, question).Select("env", "prod").Obj()
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: "mallory", UID: "uid-mallory", Groups: []string{"outsiders"}}
		return r
	}

	It("who may not answer the agent is rejected with FORBIDDEN, and the question stays Open for the next reply", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Agent("release-bot").Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, unauthorized("mallory", "deploy"))).To(Succeed())
		Eventually(outcome(ns, "mallory")).Should(Equal(hitlv1.OutcomeRejected))
		st := reply(ns, "mallory")()
		Expect(st.Reason).To(Equal(hitlv1.CodeForbidden))
		Expect(st.Message).To(Equal(`FORBIDDEN: user "mallory" may not answer the questions of agent "release-bot": it needs RBAC verb "answer" on agents.hitl.dev/release-bot (spec.answeredBy)`))
		Eventually(events(ns, "mallory", string(hitlv1.CodeForbidden))).Should(Equal(1))
		Expect(state(ns, "deploy")()).To(Equal(hitlv1.StateOpen))

		Expect(k8s.Create(ctx, Reply("alice", ns, "deploy").Select("env", "staging").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(state(ns, "deploy")).Should(Equal(hitlv1.StateSettled))
		Expect(question(ns, "deploy")().Status.Settlement.Reply).To(Equal("alice"))
	})

	It("who may not answer is rejected, not queued, on a Continued question", func() {
		Expect(k8s.Create(ctx, Question("late", ns).Ask("env", "Where?", "staging", "prod").Timeout(100*time.Millisecond).Obj())).To(Succeed())
		Eventually(state(ns, "late")).Should(Equal(hitlv1.StateContinued))
		Expect(k8s.Create(ctx, unauthorized("mallory", "late"))).To(Succeed())
		Eventually(outcome(ns, "mallory")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "mallory")().Reason).To(Equal(hitlv1.CodeForbidden))
		Expect(question(ns, "late")().Status.QueuedReply).To(BeNil())
	})

	It("missing (a reply admitted without hitl's admission) is rejected with FORBIDDEN", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("nobody", ns, "deploy").Select("env", "prod").Anonymous().Obj())).To(Succeed())
		Eventually(outcome(ns, "nobody")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "nobody")().Message).To(HavePrefix("FORBIDDEN: reply nobody carries no authenticated author (spec.answeredBy)"))
		Expect(state(ns, "deploy")()).To(Equal(hitlv1.StateOpen))
	})

	It("naming another agent than the question's is rejected with AGENT_MISMATCH, and keeps its label", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Agent("release-bot").Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		r := Reply("elsewhere", ns, "deploy").Select("env", "prod").Obj()
		r.Labels = map[string]string{hitlv1.AgentLabel: "office-bot"}
		Expect(k8s.Create(ctx, r)).To(Succeed())
		Eventually(outcome(ns, "elsewhere")).Should(Equal(hitlv1.OutcomeRejected))
		st := reply(ns, "elsewhere")()
		Expect(st.Reason).To(Equal(hitlv1.CodeAgentMismatch))
		Expect(st.Message).To(ContainSubstring(`label hitl.dev/agent="office-bot" (metadata.labels)`))
		Expect(state(ns, "deploy")()).To(Equal(hitlv1.StateOpen))
		got := &hitlv1.QuestionReply{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "elsewhere"}, got)).To(Succeed())
		Expect(got.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "office-bot"))
	})

	It("re-created under the settled reply's name by someone without the grant is Rejected FORBIDDEN, not Applied, and the question is unchanged", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("r1", ns, "deploy").Select("env", "staging").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "r1")).Should(Equal(hitlv1.OutcomeApplied))
		first := &hitlv1.QuestionReply{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "r1"}, first)).To(Succeed())
		settled := question(ns, "deploy")().Status
		Expect(settled.State).To(Equal(hitlv1.StateSettled))
		Expect(settled.Settlement.ReplyUID).To(Equal(first.UID))

		Expect(k8s.Delete(ctx, first)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "r1"}, &hitlv1.QuestionReply{}))
		}).Should(BeTrue())
		again := unauthorized("r1", "deploy")
		Expect(k8s.Create(ctx, again)).To(Succeed())
		Expect(again.UID).NotTo(Equal(first.UID))

		Eventually(outcome(ns, "r1")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "r1")().Reason).To(Equal(hitlv1.CodeForbidden))
		Expect(reply(ns, "r1")().Message).To(HavePrefix(`FORBIDDEN: user "mallory" may not answer`))
		Consistently(func() hitlv1.UserQuestionStatus { return question(ns, "deploy")().Status }, "500ms").
			Should(And(
				WithTransform(func(st hitlv1.UserQuestionStatus) hitlv1.QuestionState { return st.State }, Equal(hitlv1.StateSettled)),
				WithTransform(func(st hitlv1.UserQuestionStatus) *hitlv1.Settlement { return st.Settlement }, Equal(settled.Settlement)),
				WithTransform(func(st hitlv1.UserQuestionStatus) []hitlv1.AnswerItem { return st.Answers }, Equal(settled.Answers))))
		Expect(events(ns, "deploy", "Settled")()).To(Equal(1))
	})

	It("naming another question's UID in spec.questionRef.uid is Closed NOT_ANSWERABLE, and the question stays Open", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		Eventually(state(ns, "deploy")).Should(Equal(hitlv1.StateOpen))
		stale := Reply("stale", ns, "deploy").Select("env", "prod").AnsweredBy("alice").Obj()
		stale.Spec.QuestionRef.UID = "uid-of-an-earlier-deploy"
		Expect(k8s.Create(ctx, stale)).To(Succeed())
		Eventually(outcome(ns, "stale")).Should(Equal(hitlv1.OutcomeClosed))
		Expect(reply(ns, "stale")().Reason).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(reply(ns, "stale")().Message).To(ContainSubstring("spec.questionRef.uid"))
		Consistently(state(ns, "deploy"), "500ms").Should(Equal(hitlv1.StateOpen))

		By("a reply naming the live question's UID settles it")
		fresh := Reply("fresh", ns, "deploy").Select("env", "staging").AnsweredBy("alice").Obj()
		fresh.Spec.QuestionRef.UID = question(ns, "deploy")().UID
		Expect(k8s.Create(ctx, fresh)).To(Succeed())
		Eventually(outcome(ns, "fresh")).Should(Equal(hitlv1.OutcomeApplied))
		Expect(question(ns, "deploy")().Status.Settlement.ReplyUID).To(Equal(fresh.UID))
	})

	Describe("that asked the question", func() {
		asker := &hitlv1.UserInfo{Username: "asker", UID: "uid-asker", Groups: []string{AuthenticatedGroup}}
		askedBy := func(q *hitlv1.UserQuestion) *hitlv1.UserQuestion { q.Spec.AskedBy = asker; return q }

		for _, intent := range []struct {
			name string
			q    func() *hitlv1.UserQuestion
			yes  string
		}{
			{"Approval", func() *hitlv1.UserQuestion {
				return Question("ask", ns).Ask("a", "May I?", "allow", "deny").Approval("allow", "deny", "").Obj()
			}, "allow"},
			{"PlanReview", func() *hitlv1.UserQuestion {
				return Question("ask", ns).Ask("a", "Run it?", "yes", "no").Detail("1. do it").PlanReview("yes").Obj()
			}, "yes"},
		} {
			It("is Rejected SELF_APPROVAL on its own "+intent.name+" question, which another answerer then settles", func() {
				Expect(k8s.Create(ctx, askedBy(intent.q()))).To(Succeed())
				Expect(k8s.Create(ctx, Reply("self", ns, "ask").Select("a", intent.yes).AnsweredBy("asker").Obj())).To(Succeed())
				Eventually(outcome(ns, "self")).Should(Equal(hitlv1.OutcomeRejected))
				st := reply(ns, "self")()
				Expect(st.Reason).To(Equal(hitlv1.CodeSelfApproval))
				Expect(st.Message).To(HavePrefix("SELF_APPROVAL: asker asked question ask (spec.askedBy)"))
				Eventually(events(ns, "self", string(hitlv1.CodeSelfApproval))).Should(Equal(1))
				Consistently(state(ns, "ask"), "500ms").Should(Equal(hitlv1.StateOpen))

				Expect(k8s.Create(ctx, Reply("other", ns, "ask").Select("a", intent.yes).AnsweredBy("alice").Obj())).To(Succeed())
				Eventually(state(ns, "ask")).Should(Equal(hitlv1.StateSettled))
				Expect(question(ns, "ask")().Status.Settlement.AnsweredBy.Username).To(Equal("alice"))
			})
		}

		It("may answer its own question without an Approval or PlanReview intent", func() {
			Expect(k8s.Create(ctx, askedBy(Question("ask", ns).Ask("env", "Where?", "staging", "prod").Obj()))).To(Succeed())
			Expect(k8s.Create(ctx, Reply("self", ns, "ask").Select("env", "staging").AnsweredBy("asker").Obj())).To(Succeed())
			Eventually(outcome(ns, "self")).Should(Equal(hitlv1.OutcomeApplied))
			Expect(question(ns, "ask")().Status.Settlement.AnsweredBy.Username).To(Equal("asker"))
		})
	})

	It("gets the agent and question labels and an owner reference when the reply lacks them", func() {
		Expect(k8s.Create(ctx, Question("deploy", ns).Agent("release-bot").Ask("env", "Where?", "staging", "prod").Obj())).To(Succeed())
		q := question(ns, "deploy")()
		Expect(k8s.Create(ctx, Reply("bare", ns, "deploy").Select("env", "prod").Obj())).To(Succeed())
		Eventually(outcome(ns, "bare")).Should(Equal(hitlv1.OutcomeApplied))
		Eventually(func() *hitlv1.QuestionReply {
			got := &hitlv1.QuestionReply{}
			Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "bare"}, got)).To(Succeed())
			return got
		}).Should(And(
			WithTransform(func(r *hitlv1.QuestionReply) map[string]string { return r.Labels },
				Equal(map[string]string{hitlv1.AgentLabel: "release-bot", hitlv1.QuestionLabel: "deploy"})),
			WithTransform(func(r *hitlv1.QuestionReply) bool { return r.OwnedBy(q) }, BeTrue())))
	})
})

var _ = Describe("A timed question", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("becomes Continued at its deadline, queues a late reply, refuses a second, and settles late on admission", func() {
		Expect(k8s.Create(ctx, Question("lunch", ns).Ask("food", "What?", "pizza", "sushi").Multi().Timeout(2*time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "lunch")).Should(Equal(hitlv1.StateOpen))
		q := question(ns, "lunch")()
		Expect(q.Status.Deadline.Time).To(Equal(q.CreationTimestamp.Add(2 * time.Second)))

		Eventually(state(ns, "lunch")).Should(Equal(hitlv1.StateContinued))
		q = question(ns, "lunch")()
		Expect(q.Status.ContinuedAt.Time).NotTo(BeTemporally("<", q.Status.Deadline.Time.Truncate(time.Second)), "never early")
		Eventually(events(ns, "lunch", "Continued")).Should(Equal(1))

		Expect(k8s.Create(ctx, Reply("first", ns, "lunch").Select("food", "pizza", "sushi").AnsweredBy("alice").Obj())).To(Succeed())
		Eventually(outcome(ns, "first")).Should(Equal(hitlv1.OutcomeQueued))
		q = question(ns, "lunch")()
		Expect(q.Status.State).To(Equal(hitlv1.StateContinued))
		Expect(q.Status.QueuedReply.Name).To(Equal("first"))
		Expect(q.Status.QueuedReply.Answers).To(HaveLen(1))

		Expect(k8s.Create(ctx, Reply("second", ns, "lunch").Select("food", "sushi").Obj())).To(Succeed())
		Eventually(outcome(ns, "second")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "second")().Reason).To(Equal(hitlv1.CodeReplyQueued))
		Expect(reply(ns, "second")().Message).To(HavePrefix("REPLY_QUEUED: question lunch already has queued reply first"))

		update(ns, "lunch", func(q *hitlv1.UserQuestion) { q.Spec.AdmittedReply = "first" })
		Eventually(state(ns, "lunch")).Should(Equal(hitlv1.StateSettled))
		q = question(ns, "lunch")()
		Expect(q.Status.Settlement.Late).To(BeTrue())
		Expect(q.Status.Settlement.Reply).To(Equal("first"))
		Expect(q.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "food", Selected: []string{"pizza", "sushi"}}}))
		Expect(q.Status.QueuedReply).To(BeNil())
		Eventually(outcome(ns, "first")).Should(Equal(hitlv1.OutcomeAdmitted))

		By("deleting the admitted reply changes nothing")
		Expect(k8s.Delete(ctx, &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: ns}})).To(Succeed())
		Consistently(state(ns, "lunch"), "500ms").Should(Equal(hitlv1.StateSettled))
		Expect(question(ns, "lunch")().Status.Answers).To(HaveLen(1))
		// Events are written by a queue of their own, after the status.
		Eventually(events(ns, "lunch", "Settled")).Should(Equal(1))
	})

	It("clears a withdrawn queued reply and stays answerable", func() {
		Expect(k8s.Create(ctx, Question("w", ns).Ask("q", "Q?", "yes", "no").Timeout(time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "w")).Should(Equal(hitlv1.StateContinued))
		Expect(k8s.Create(ctx, Reply("oops", ns, "w").Select("q", "yes").Obj())).To(Succeed())
		Eventually(outcome(ns, "oops")).Should(Equal(hitlv1.OutcomeQueued))

		Expect(k8s.Delete(ctx, &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Name: "oops", Namespace: ns}})).To(Succeed())
		Eventually(func() *hitlv1.QueuedReply { return question(ns, "w")().Status.QueuedReply }).Should(BeNil())
		Expect(state(ns, "w")()).To(Equal(hitlv1.StateContinued))

		Expect(k8s.Create(ctx, Reply("better", ns, "w").Select("q", "no").Obj())).To(Succeed())
		Eventually(outcome(ns, "better")).Should(Equal(hitlv1.OutcomeQueued))
	})

	It("closes a queued reply with NOT_ANSWERABLE when the agent cancels", func() {
		Expect(k8s.Create(ctx, Question("cq", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "cq")).Should(Equal(hitlv1.StateContinued))
		Expect(k8s.Create(ctx, Reply("waiting", ns, "cq").Custom("q", "answer").Obj())).To(Succeed())
		Eventually(outcome(ns, "waiting")).Should(Equal(hitlv1.OutcomeQueued))
		update(ns, "cq", func(q *hitlv1.UserQuestion) { q.Spec.Cancelled = true })
		Eventually(state(ns, "cq")).Should(Equal(hitlv1.StateCancelled))
		Expect(question(ns, "cq")().Status.QueuedReply).To(BeNil())
		Eventually(outcome(ns, "waiting")).Should(Equal(hitlv1.OutcomeClosed))
		Expect(reply(ns, "waiting")().Reason).To(Equal(hitlv1.CodeNotAnswerable))
	})

	It("stays Open while a claim is live, and becomes Continued within seconds of its deletion, long before it would have expired", func() {
		// The claim first: created after the question, a slow API server
		// could let the question's 1 s window close before it exists.
		Expect(k8s.Create(ctx, claim(ns, "held-alice", "held", "alice", 30))).To(Succeed())
		Expect(k8s.Create(ctx, Question("held", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		Eventually(func() []hitlv1.ClaimHolder { return question(ns, "held")().Status.Claims }).
			Should(Equal([]hitlv1.ClaimHolder{{Name: "held-alice", Holder: "alice"}}))
		Consistently(state(ns, "held"), "2500ms").Should(Equal(hitlv1.StateOpen))

		Expect(k8s.Delete(ctx, claim(ns, "held-alice", "held", "alice", 30))).To(Succeed())
		deleted := time.Now()
		// The 30 s claim, unrenewed, would hold the window 25 s more: 5 s
		// tells a window closed by the deletion on a slow machine.
		Eventually(state(ns, "held"), "5s", "10ms").Should(Equal(hitlv1.StateContinued))
		Expect(time.Since(deleted)).To(BeNumerically("<", 5*time.Second))
		Expect(question(ns, "held")().Status.Claims).To(BeEmpty())
	})

	It("becomes Continued when its only claim expires unrenewed", func() {
		Expect(k8s.Create(ctx, Question("lapsed", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		Expect(k8s.Create(ctx, claim(ns, "lapsed-bob", "lapsed", "bob", 5))).To(Succeed())
		created := time.Now()
		Eventually(state(ns, "lapsed"), "30s").Should(Equal(hitlv1.StateContinued))
		Expect(time.Since(created)).To(BeNumerically(">=", 4*time.Second), "the claim held the window for its lease duration")
	})

	It("is not held open by a claim naming another agent, or one without a holder", func() {
		// The claims first, as above: they exist when the window opens.
		foreign := claim(ns, "unheld-foreign", "unheld", "alice", 30)
		foreign.Spec.Agent = "other-bot"
		Expect(k8s.Create(ctx, foreign)).To(Succeed())
		unstamped := claim(ns, "unheld-unstamped", "unheld", "alice", 30)
		unstamped.Spec.Holder = nil
		Expect(k8s.Create(ctx, unstamped)).To(Succeed())
		Expect(k8s.Create(ctx, Question("unheld", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		created := time.Now()
		// Either claim, if it counted, would hold the window 30 s.
		Eventually(state(ns, "unheld"), "10s", "10ms").Should(Equal(hitlv1.StateContinued))
		Expect(time.Since(created)).To(BeNumerically("<", 10*time.Second))
		q := question(ns, "unheld")()
		Expect(q.Status.Claims).To(BeEmpty())
		Expect(q.Status.ClaimCount).To(BeZero())
	})

	It("ignores claims on a blocking question except to list them", func() {
		Expect(k8s.Create(ctx, Question("b", ns).Ask("q", "Q?").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, claim(ns, "b-carol", "b", "carol", 30))).To(Succeed())
		Eventually(func() []hitlv1.ClaimHolder { return question(ns, "b")().Status.Claims }).Should(HaveLen(1))
		Expect(state(ns, "b")()).To(Equal(hitlv1.StateOpen))
	})

	It("is deleted with its replies after ttlSecondsAfterFinished", func() {
		Expect(k8s.Create(ctx, Question("ttl", ns).Ask("q", "Q?").TTL(1).Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("ttl-r", ns, "ttl").Custom("q", "done").Obj())).To(Succeed())
		Eventually(state(ns, "ttl")).Should(Equal(hitlv1.StateSettled))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ttl"}, &hitlv1.UserQuestion{}))
		}, "15s").Should(BeTrue())
		Expect(apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "ttl-r"}, &hitlv1.QuestionReply{}))).To(BeTrue())
	})
})

var _ = Describe("Hardening", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("with ttlSecondsAfterFinished 0 writes the settlement, the reply's outcome and the event before deleting anything", func() {
		watcher, err := client.NewWithWatch(cfg, client.Options{Scheme: k8s.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		w, err := watcher.Watch(ctx, &hitlv1.UserQuestionList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		rw, err := watcher.Watch(ctx, &hitlv1.QuestionReplyList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer rw.Stop()

		Expect(k8s.Create(ctx, Question("now", ns).Ask("q", "Q?", "yes", "no").TTL(0).Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("now-r", ns, "now").Select("q", "yes").Obj())).To(Succeed())

		var seen []string
		settledSeen := false
		Eventually(func() bool {
			ev := <-w.ResultChan()
			q := ev.Object.(*hitlv1.UserQuestion)
			seen = append(seen, string(ev.Type)+"/"+string(q.Status.State))
			if q.Status.State == hitlv1.StateSettled && ev.Type == watch.Modified {
				settledSeen = true
				Expect(q.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "q", Selected: []string{"yes"}}}))
			}
			return ev.Type == watch.Deleted
		}, "30s").Should(BeTrue())
		Expect(settledSeen).To(BeTrue(), "a watcher saw %v: never Settled before the deletion", seen)

		applied := false
		Eventually(func() bool {
			ev := <-rw.ResultChan()
			if r := ev.Object.(*hitlv1.QuestionReply); r.Status.Outcome == hitlv1.OutcomeApplied {
				applied = true
			}
			return ev.Type == watch.Deleted
		}, "30s").Should(BeTrue())
		Expect(applied).To(BeTrue(), "the reply was deleted before its outcome was written")
		Expect(events(ns, "now", "Settled")()).To(Equal(1), "the Settled event is written before the question is deleted")
	})

	It("counts and lists 64 of 100 live claims, the first by name, and keeps writing its status", func() {
		Expect(k8s.Create(ctx, Question("crowded", ns).Ask("q", "Q?").Timeout(time.Hour).Obj())).To(Succeed())
		for i := range 100 {
			Expect(k8s.Create(ctx, claim(ns, fmt.Sprintf("c-%03d", i), "crowded", fmt.Sprintf("person-%d", i), 60))).To(Succeed())
		}
		Eventually(func() int32 { return question(ns, "crowded")().Status.ClaimCount }, "30s").Should(BeEquivalentTo(hitlv1.MaxClaims))
		Consistently(func() int32 { return question(ns, "crowded")().Status.ClaimCount }, "1s").Should(BeEquivalentTo(hitlv1.MaxClaims))
		q := question(ns, "crowded")()
		Expect(q.Status.Claims).To(HaveLen(hitlv1.MaxClaims))
		Expect(q.Status.Claims[0].Name).To(Equal("c-000"))
		Expect(q.Status.Claims[hitlv1.MaxClaims-1].Name).To(Equal("c-063"))

		By("the question still settles")
		Expect(k8s.Create(ctx, Reply("through", ns, "crowded").Custom("q", "finally").Obj())).To(Succeed())
		Eventually(state(ns, "crowded")).Should(Equal(hitlv1.StateSettled))
	})

	It("measures the window from spec.askedAt, so that it never closes before timeout has passed since the ask", func() {
		// An ask sent 900ms into a second: creationTimestamp is that
		// second's start, and a window measured from it would close 900ms early.
		start := time.Now()
		for start.Nanosecond() < 850*int(time.Millisecond) || start.Nanosecond() > 950*int(time.Millisecond) {
			time.Sleep(5 * time.Millisecond)
			start = time.Now()
		}
		q := Question("precise", ns).Ask("q", "Q?").Timeout(2 * time.Second).Obj()
		q.Spec.AskedAt = &metav1.MicroTime{Time: start}
		Expect(k8s.Create(ctx, q)).To(Succeed())
		Eventually(state(ns, "precise"), "5s", "10ms").Should(Equal(hitlv1.StateContinued))
		Expect(time.Since(start)).To(BeNumerically(">=", 2*time.Second))
		got := question(ns, "precise")()
		Expect(got.Status.Deadline.Time).To(BeTemporally("~", start.Add(2*time.Second), time.Microsecond))
		Expect(got.Status.ContinuedAt.Time).NotTo(BeTemporally("<", got.Status.Deadline.Time))
		Expect(got.Status.ContinuedAt.Time).NotTo(Equal(got.Status.ContinuedAt.Time.Truncate(time.Second)), "continuedAt keeps sub-second precision")
	})
})

var _ = Describe("Racing replies", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	createConcurrently := func(question string, n int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				Expect(k8s.Create(ctx, Reply(fmt.Sprintf("r%02d", i), ns, question).Select("q", "yes").Obj())).To(Succeed())
			}()
		}
		wg.Wait()
	}
	outcomes := func() map[string]int {
		var list hitlv1.QuestionReplyList
		Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		counts := map[string]int{}
		for _, r := range list.Items {
			counts[string(r.Status.Outcome)+"/"+string(r.Status.Reason)]++
		}
		return counts
	}

	It("queues exactly one of 50 concurrent replies to a Continued question", func() {
		Expect(k8s.Create(ctx, Question("c50", ns).Ask("q", "Q?", "yes", "no").Timeout(time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "c50")).Should(Equal(hitlv1.StateContinued))
		createConcurrently("c50", 50)
		Eventually(outcomes).Should(Equal(map[string]int{"Queued/": 1, "Rejected/REPLY_QUEUED": 49}))
		Consistently(outcomes, "500ms").Should(Equal(map[string]int{"Queued/": 1, "Rejected/REPLY_QUEUED": 49}))
	})

	It("applies exactly one of 50 concurrent replies to an Open question and settles it once", func() {
		Expect(k8s.Create(ctx, Question("o50", ns).Ask("q", "Q?", "yes", "no").Obj())).To(Succeed())
		Eventually(state(ns, "o50")).Should(Equal(hitlv1.StateOpen))

		// Watch the question's status history while the replies race.
		w, err := k8sWatch(ns)
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		var history []hitlv1.QuestionState
		var settledBy []string
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ev := range w.ResultChan() {
				if q, ok := ev.Object.(*hitlv1.UserQuestion); ok && q.Name == "o50" {
					history = append(history, q.Status.State)
					if q.Status.Settlement != nil {
						settledBy = append(settledBy, q.Status.Settlement.Reply)
					}
				}
			}
		}()

		createConcurrently("o50", 50)
		Eventually(outcomes).Should(Equal(map[string]int{"Applied/": 1, "Closed/NOT_ANSWERABLE": 49}))
		Consistently(outcomes, "500ms").Should(Equal(map[string]int{"Applied/": 1, "Closed/NOT_ANSWERABLE": 49}))
		w.Stop()
		<-done
		Expect(settledBy).NotTo(BeEmpty())
		for _, name := range settledBy {
			Expect(name).To(Equal(settledBy[0]), "settled by one reply only")
		}
		for i := 1; i < len(history); i++ {
			if history[i-1] == hitlv1.StateSettled {
				Expect(history[i]).To(Equal(hitlv1.StateSettled), "nothing moves a question out of Settled")
			}
		}
		// Events are written by a queue of their own, after the status.
		Eventually(events(ns, "o50", "Settled")).Should(Equal(1))
	})
})

var _ = Describe("A manager restart", Ordered, func() {
	var ns string
	BeforeAll(func() { ns = newNamespace() })
	AfterEach(func() {
		if stopMgr == nil {
			startManager()
		}
	})

	It("keeps a queued reply queued and still refuses a second one with REPLY_QUEUED", func() {
		Expect(k8s.Create(ctx, Question("rq", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		Eventually(state(ns, "rq")).Should(Equal(hitlv1.StateContinued))
		Expect(k8s.Create(ctx, Reply("kept", ns, "rq").Custom("q", "a").Obj())).To(Succeed())
		Eventually(outcome(ns, "kept")).Should(Equal(hitlv1.OutcomeQueued))

		stopManager()
		Expect(k8s.Create(ctx, Reply("during", ns, "rq").Custom("q", "b").Obj())).To(Succeed())
		startManager()
		Expect(k8s.Create(ctx, Reply("after", ns, "rq").Custom("q", "c").Obj())).To(Succeed())

		Eventually(outcome(ns, "during")).Should(Equal(hitlv1.OutcomeRejected))
		Eventually(outcome(ns, "after")).Should(Equal(hitlv1.OutcomeRejected))
		Expect(reply(ns, "during")().Reason).To(Equal(hitlv1.CodeReplyQueued))
		Expect(reply(ns, "after")().Reason).To(Equal(hitlv1.CodeReplyQueued))
		Expect(question(ns, "rq")().Status.QueuedReply.Name).To(Equal("kept"))
		Expect(outcome(ns, "kept")()).To(Equal(hitlv1.OutcomeQueued))
	})

	It("closes a reply created before its question with NOT_ANSWERABLE, and the question stays Open", func() {
		stopManager()
		Expect(k8s.Create(ctx, Reply("early", ns, "later").Select("q", "yes").AnsweredBy("alice").Obj())).To(Succeed())
		// Creation timestamps have whole seconds: the question's is a later one.
		time.Sleep(1100 * time.Millisecond)
		Expect(k8s.Create(ctx, Question("later", ns).Ask("q", "Q?", "yes", "no").Obj())).To(Succeed())
		early := &hitlv1.QuestionReply{}
		Expect(k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "early"}, early)).To(Succeed())
		Expect(early.CreationTimestamp.Before(&question(ns, "later")().CreationTimestamp)).To(BeTrue())
		startManager()

		Eventually(outcome(ns, "early"), "15s").Should(Equal(hitlv1.OutcomeClosed))
		Expect(reply(ns, "early")().Reason).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(reply(ns, "early")().Message).To(ContainSubstring("before question later"))
		Consistently(state(ns, "later"), "500ms").Should(Equal(hitlv1.StateOpen))
		Expect(question(ns, "later")().Status.Settlement).To(BeNil())
	})

	It("handles a deadline that passed while it was stopped as soon as it is back", func() {
		stopManager()
		Expect(k8s.Create(ctx, Question("missed", ns).Ask("q", "Q?").Timeout(time.Second).Obj())).To(Succeed())
		time.Sleep(2 * time.Second)
		Expect(state(ns, "missed")()).To(BeEmpty(), "nobody reconciled it while the manager was down")
		startManager()
		// The manager starts, syncs its cache and reconciles what it lists.
		Eventually(state(ns, "missed"), "15s").Should(Equal(hitlv1.StateContinued))
		Expect(events(ns, "missed", "Settled")()).To(BeZero())
	})
})

func k8sWatch(ns string) (watch.Interface, error) {
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	return wc.Watch(ctx, &hitlv1.UserQuestionList{}, client.InNamespace(ns))
}

var _ = Describe("The metrics endpoint", func() {
	It("counts replies by outcome and questions by state", func() {
		ns := newNamespace()
		before := counter("hitl_replies_total", map[string]string{"outcome": "Applied", "reason": ""})
		Expect(k8s.Create(ctx, Question("m", ns).Ask("q", "Q?").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Reply("m-r", ns, "m").Custom("q", "a").Obj())).To(Succeed())
		Eventually(outcome(ns, "m-r")).Should(Equal(hitlv1.OutcomeApplied))
		// The controller counts a reply once the API server has its
		// outcome, and hitl_questions is read from the manager's cache,
		// which may not hold the settled question yet.
		Eventually(func() float64 {
			return counter("hitl_replies_total", map[string]string{"outcome": "Applied", "reason": ""})
		}).Should(Equal(before + 1))
		Eventually(func() float64 { return counter("hitl_questions", map[string]string{"state": "Settled"}) }).Should(BeNumerically(">=", 1))
		Expect(counter("hitl_question_settle_seconds", map[string]string{"late": "false"})).To(BeNumerically(">=", 1))
	})
})

// counter reads a counter or gauge value, or a histogram's sample count,
// from the registry the metrics endpoint serves.
func counter(name string, labels map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metric
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}
