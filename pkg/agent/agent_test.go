package agent_test

import (
	"context"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	. "github.com/hitl-dev/hitl/test/builders"
)

// where is a one-question ask: where to deploy, staging or prod.
func where() []hitlv1.Question {
	return Question("", "").Ask("env", "Where to deploy?", "staging", "prod").Obj().Spec.Questions
}

// chose is the batch that answers where with env.
func chose(env string) []hitlv1.AnswerItem {
	return []hitlv1.AnswerItem{{ID: "env", Selected: []string{env}}}
}

// asked is what an asking call returned.
type asked struct {
	res agent.Result
	err error
}

// async runs an asking call, which blocks until the question is answered,
// in the background.
func async(ask func() (agent.Result, error)) <-chan asked {
	out := make(chan asked, 1)
	go func() {
		defer GinkgoRecover()
		res, err := ask()
		out <- asked{res, err}
	}()
	return out
}

func question(ns, name string) func() *hitlv1.UserQuestion {
	return func() *hitlv1.UserQuestion {
		GinkgoHelper()
		q := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, q)).To(Succeed())
		return q
	}
}

func state(ns, name string) func() hitlv1.QuestionState {
	return func() hitlv1.QuestionState { return question(ns, name)().Status.State }
}

func queuedReply(ns, name string) func() string {
	return func() string {
		if qr := question(ns, name)().Status.QueuedReply; qr != nil {
			return qr.Name
		}
		return ""
	}
}

func exists(ns, name string) func() error {
	return func() error {
		return admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &hitlv1.UserQuestion{})
	}
}

// answer replies to a question, as the admin user, with env.
func answer(ns, q, reply, env string) {
	GinkgoHelper()
	Expect(admin.Create(ctx, Reply(reply, ns, q).Select("env", env).Obj())).To(Succeed())
}

// queue sends a late reply and waits until the controller has queued it.
func queue(ns, q, reply, env string) {
	GinkgoHelper()
	answer(ns, q, reply, env)
	Eventually(queuedReply(ns, q)).Should(Equal(reply))
}

// pending asks a timed question whose window closes unanswered.
func pending(bot *agent.Agent, name string) {
	GinkgoHelper()
	res, err := bot.AskTimed(ctx, agent.Request{Name: name, Questions: where()}, time.Second)
	Expect(err).NotTo(HaveOccurred())
	Expect(res).To(Equal(agent.Result{Question: name, CallID: name, Pending: true}))
}

func blocking(bot *agent.Agent, name string) *hitlv1.UserQuestion {
	GinkgoHelper()
	q, err := bot.Create(ctx, agent.Request{Name: name, Questions: where()}, nil)
	Expect(err).NotTo(HaveOccurred())
	return q
}

func codeOf(err error) hitlv1.ErrorCode { return validation.CodeOf(err) }

var _ = Describe("Asking", func() {
	var (
		ns  string
		bot *agent.Agent
		got asked
	)
	BeforeEach(func() {
		ns = newNamespace()
		bot = agent.New(admin, ns, "bot")
	})

	It("returns the answers of an in-window reply to a blocking question", func() {
		done := async(func() (agent.Result, error) {
			return bot.Ask(ctx, agent.Request{Name: "deploy", CallID: "call-1", Questions: where()})
		})
		Eventually(exists(ns, "deploy")).Should(Succeed())
		Consistently(done, 200*time.Millisecond).ShouldNot(Receive())
		answer(ns, "deploy", "alice", "prod")
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res).To(Equal(agent.Result{Question: "deploy", CallID: "call-1", Answers: chose("prod")}))
	})

	It("returns pending with the call id when the window closes, and the answers of an in-window reply", func() {
		res, err := bot.AskTimed(ctx, agent.Request{Name: "late", CallID: "call-2", Questions: where()}, time.Second)
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(agent.Result{Question: "late", CallID: "call-2", Pending: true}))
		Expect(state(ns, "late")()).To(Equal(hitlv1.StateContinued))

		done := async(func() (agent.Result, error) {
			return bot.AskTimed(ctx, agent.Request{Name: "quick", Questions: where()}, time.Minute)
		})
		Eventually(exists(ns, "quick")).Should(Succeed())
		answer(ns, "quick", "quick-reply", "staging")
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res).To(Equal(agent.Result{Question: "quick", CallID: "quick", Answers: chose("staging")}))
	})

	It("names the question after the agent and labels it with the agent", func() {
		done := async(func() (agent.Result, error) { return bot.Ask(ctx, agent.Request{Questions: where()}) })
		var list hitlv1.UserQuestionList
		Eventually(func() []hitlv1.UserQuestion {
			Expect(admin.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			return list.Items
		}).Should(HaveLen(1))
		q := list.Items[0]
		Expect(q.Name).To(HavePrefix("bot-"))
		Expect(q.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "bot"))
		Expect(q.Spec.Agent).To(Equal("bot"))
		answer(ns, q.Name, "generated", "prod")
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res.Question).To(Equal(q.Name))
	})

	It("cancels the question and returns ASK_ABORTED when the context of Ask is cancelled", func() {
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := async(func() (agent.Result, error) { return bot.Ask(actx, agent.Request{Name: "abort", Questions: where()}) })
		Eventually(exists(ns, "abort")).Should(Succeed())
		cancel()
		Eventually(done).Should(Receive(&got))
		Expect(codeOf(got.err)).To(Equal(hitlv1.CodeAskAborted))
		Expect(got.err).To(MatchError(context.Canceled))
		Expect(got.err.Error()).To(HavePrefix("ASK_ABORTED: "))
		Expect(question(ns, "abort")().Spec.Cancelled).To(BeTrue())
		Eventually(state(ns, "abort")).Should(Equal(hitlv1.StateCancelled))
	})

	It("cancels the question of an ask whose context ends while the create is in flight", func() {
		// The API server makes the question, and the caller's context ends
		// before its answer is read: a client reading with that context
		// would return the context's error and never learn the generated
		// name. The ask must still find its question cancelled.
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		var created atomic.Pointer[hitlv1.UserQuestion]
		c := interceptor.NewClient(admin, interceptor.Funcs{
			Create: func(cctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := c.Create(cctx, obj, opts...); err != nil {
					return err
				}
				created.Store(obj.(*hitlv1.UserQuestion).DeepCopy())
				cancel()
				return cctx.Err()
			},
		})
		_, err := agent.New(c, ns, "bot").Ask(actx, agent.Request{Questions: where()})
		Expect(codeOf(err)).To(Equal(hitlv1.CodeAskAborted))
		Expect(err).To(MatchError(context.Canceled))
		q := created.Load()
		Expect(q).NotTo(BeNil())
		Expect(q.Name).To(HavePrefix("bot-"))
		Expect(err).To(MatchError(ContainSubstring("question " + q.Name + " was aborted")))
		Expect(question(ns, q.Name)().Spec.Cancelled).To(BeTrue())
		Eventually(state(ns, q.Name)).Should(Equal(hitlv1.StateCancelled))
	})

	It("returns ASK_ABORTED when someone else cancels the question", func() {
		done := async(func() (agent.Result, error) { return bot.Ask(ctx, agent.Request{Name: "theirs", Questions: where()}) })
		Eventually(exists(ns, "theirs")).Should(Succeed())
		Eventually(func() error {
			q := question(ns, "theirs")()
			q.Spec.Cancelled = true
			return admin.Update(ctx, q)
		}).Should(Succeed())
		Eventually(done).Should(Receive(&got))
		Expect(codeOf(got.err)).To(Equal(hitlv1.CodeAskAborted))
		Expect(got.err).To(MatchError(ContainSubstring("question theirs was cancelled")))
	})

	It("returns the answer of a question that ttlSecondsAfterFinished 0 deletes as soon as it settles", func() {
		Expect(admin.Create(ctx, Question("fleeting", ns).Agent("bot").Ask("env", "Where?", "staging", "prod").TTL(0).Obj())).To(Succeed())
		type waited struct {
			q   *hitlv1.UserQuestion
			err error
		}
		got := make(chan waited, 1)
		go func() {
			q, err := bot.Wait(ctx, "fleeting", func(q *hitlv1.UserQuestion) bool { return q.Status.State == hitlv1.StateSettled })
			got <- waited{q, err}
		}()
		Eventually(state(ns, "fleeting")).Should(Equal(hitlv1.StateOpen))
		answer(ns, "fleeting", "fleeting-r", "prod")
		var w waited
		Eventually(got, "10s").Should(Receive(&w))
		Expect(w.err).NotTo(HaveOccurred())
		Expect(w.q.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}}))
		Eventually(exists(ns, "fleeting"), "10s").ShouldNot(Succeed(), "the TTL deletes it")
	})

	It("returns NOT_ANSWERABLE when the question is deleted while it waits", func() {
		done := async(func() (agent.Result, error) { return bot.Ask(ctx, agent.Request{Name: "deleted", Questions: where()}) })
		Eventually(exists(ns, "deleted")).Should(Succeed())
		Expect(admin.Delete(ctx, question(ns, "deleted")())).To(Succeed())
		Eventually(done).Should(Receive(&got))
		Expect(codeOf(got.err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(got.err).To(MatchError(ContainSubstring("question deleted of agent bot does not exist")))
	})

	It("returns ASK_ABORTED without asking when the context is already cancelled", func() {
		actx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := bot.AskTimed(actx, agent.Request{Name: "never", Questions: where()}, time.Minute)
		Expect(codeOf(err)).To(Equal(hitlv1.CodeAskAborted))
		Expect(apierrors.IsNotFound(exists(ns, "never")())).To(BeTrue())
	})
})

var _ = Describe("Creating", func() {
	var (
		ns  string
		bot *agent.Agent
	)
	BeforeEach(func() {
		ns = newNamespace()
		bot = agent.New(admin, ns, "bot")
	})

	It("refuses a bad ask locally with its code, and creates nothing", func() {
		_, err := bot.Create(ctx, agent.Request{Name: "empty"}, nil)
		Expect(err).To(BeAssignableToTypeOf(&validation.Error{}))
		Expect(codeOf(err)).To(Equal(hitlv1.CodeEmptyQuestions))

		plan := Question("", "").Ask("plan", "Ship it?", "yes", "no").Detail("1. build 2. ship").PlanReview("maybe").Obj().Spec.Questions
		_, err = bot.Create(ctx, agent.Request{Name: "plan", Questions: plan}, nil)
		Expect(codeOf(err)).To(Equal(hitlv1.CodeBadIntent))
		Expect(err).To(MatchError(ContainSubstring(`question plan: "maybe" must name one of the options`)))

		long := 24*time.Hour + time.Millisecond
		_, err = bot.Create(ctx, agent.Request{Name: "long", Questions: where()}, &long)
		Expect(err).To(BeAssignableToTypeOf(&validation.Error{}))
		Expect(codeOf(err)).To(Equal(hitlv1.CodeBadTimeout))

		var list hitlv1.UserQuestionList
		Expect(admin.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		Expect(list.Items).To(BeEmpty())
	})

	It("brings back the codes the API server refuses an ask with", func() {
		_, err := bot.Create(ctx, agent.Request{Name: "mislabelled", Questions: where(),
			Labels: map[string]string{hitlv1.AgentLabel: "someone-else"}}, nil)
		Expect(codeOf(err)).To(Equal(hitlv1.CodeAgentMismatch))
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "the admission policy's denial is kept as the cause")
		Expect(err.Error()).To(HavePrefix("AGENT_MISMATCH: "))

		// Within the SDK's bound, above this manager's --max-timeout.
		twoHours := 2 * time.Hour
		_, err = bot.Create(ctx, agent.Request{Name: "two-hours", Questions: where()}, &twoHours)
		Expect(codeOf(err)).To(Equal(hitlv1.CodeBadTimeout))
		Expect(err).To(MatchError(ContainSubstring("above the maximum of 1h0m0s")))
	})
})

var _ = Describe("The view", func() {
	var (
		ns  string
		bot *agent.Agent
	)
	BeforeEach(func() {
		ns = newNamespace()
		bot = agent.New(admin, ns, "bot")
	})

	It("lists active questions in ask order and settled ones in settlement order", func() {
		for _, name := range []string{"s-a", "s-b", "s-c"} {
			blocking(bot, name)
		}
		// Settlement times have a resolution of one second, so each
		// settlement waits for the next second to make the order visible.
		settle := func(name string) time.Time {
			GinkgoHelper()
			answer(ns, name, name+"-reply", "prod")
			Eventually(state(ns, name)).Should(Equal(hitlv1.StateSettled))
			return question(ns, name)().Status.Settlement.At.Time
		}
		at := settle("s-c")
		time.Sleep(time.Until(at.Add(time.Second)))
		at = settle("s-a")
		time.Sleep(time.Until(at.Add(time.Second)))
		settle("s-b")

		// Ask order is creation order, not name order.
		z := blocking(bot, "act-z")
		time.Sleep(time.Until(z.CreationTimestamp.Add(time.Second)))
		pending(bot, "act-a")
		blocking(bot, "act-cancelled")
		Expect(bot.Cancel(ctx, "act-cancelled")).To(Succeed())
		Eventually(state(ns, "act-cancelled")).Should(Equal(hitlv1.StateCancelled))

		v, err := bot.Projection(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Active).To(Equal([]agent.PendingQuestion{
			{Name: "act-z", CallID: "act-z", Questions: where(), State: hitlv1.StateOpen},
			{Name: "act-a", CallID: "act-a", Questions: where(), State: hitlv1.StateContinued},
		}))
		var settled []string
		for _, s := range v.Settled {
			Expect(s.Answers).To(Equal(chose("prod")))
			Expect(s.Late).To(BeFalse())
			settled = append(settled, s.Name)
		}
		Expect(settled).To(Equal([]string{"s-c", "s-a", "s-b"}))
		Expect(v.Settled[0].At).To(BeTemporally("<", v.Settled[1].At))
	})

	It("shows an agent only its own questions", func() {
		other := agent.New(admin, ns, "other-bot")
		_, err := other.Create(ctx, agent.Request{Name: "theirs", Questions: where()}, nil)
		Expect(err).NotTo(HaveOccurred())
		blocking(bot, "mine")

		v, err := bot.Projection(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(v.Active).To(HaveLen(1))
		Expect(v.Active[0].Name).To(Equal("mine"))

		_, err = bot.Wait(ctx, "theirs", func(*hitlv1.UserQuestion) bool { return true })
		Expect(codeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(codeOf(bot.Cancel(ctx, "theirs"))).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(question(ns, "theirs")().Spec.Cancelled).To(BeFalse())
	})
})

var _ = Describe("Late replies", func() {
	var (
		ns  string
		bot *agent.Agent
	)
	BeforeEach(func() {
		ns = newNamespace()
		bot = agent.New(admin, ns, "bot")
	})

	It("streams the replies queued before and after the call, each once, and only the agent's", func() {
		pending(bot, "before")
		queue(ns, "before", "r-before", "prod")

		sctx, stop := context.WithCancel(ctx)
		defer stop()
		replies, err := bot.LateReplies(sctx)
		Expect(err).NotTo(HaveOccurred())
		var r agent.LateReply
		Eventually(replies).Should(Receive(&r))
		Expect(r.Question).To(Equal("before"))
		Expect(r.CallID).To(Equal("before"))
		Expect(r.Reply).To(Equal("r-before"))
		Expect(r.Answers).To(Equal(chose("prod")))
		Expect(r.AnsweredBy).NotTo(BeNil())
		Expect(r.QueuedAt).NotTo(BeZero())

		timeout := time.Second
		_, err = agent.New(admin, ns, "other-bot").Create(ctx, agent.Request{Name: "theirs", Questions: where()}, &timeout)
		Expect(err).NotTo(HaveOccurred())
		pending(bot, "after")
		Eventually(state(ns, "theirs")).Should(Equal(hitlv1.StateContinued))
		queue(ns, "theirs", "r-theirs", "prod")
		queue(ns, "after", "r-after", "staging")
		Eventually(replies).Should(Receive(&r))
		Expect(r.Reply).To(Equal("r-after"))
		Expect(r.Answers).To(Equal(chose("staging")))
		Consistently(replies, 300*time.Millisecond).ShouldNot(Receive())

		stop()
		Eventually(replies).Should(BeClosed())
	})

	It("admits a queued reply and settles the question late with its batch", func() {
		pending(bot, "adm")
		queue(ns, "adm", "r-late", "staging")

		res, err := bot.Admit(ctx, "adm", "r-late")
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(agent.Result{Question: "adm", CallID: "adm", Answers: chose("staging")}))
		q := question(ns, "adm")()
		Expect(q.Spec.AdmittedReply).To(Equal("r-late"))
		Expect(q.Status.State).To(Equal(hitlv1.StateSettled))
		Expect(q.Status.Settlement.Late).To(BeTrue())
		Expect(q.Status.Settlement.Reply).To(Equal("r-late"))
		Eventually(func() hitlv1.ReplyOutcome {
			r := &hitlv1.QuestionReply{}
			Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "r-late"}, r)).To(Succeed())
			return r.Status.Outcome
		}).Should(Equal(hitlv1.OutcomeAdmitted))

		// A retried call returns the same batch.
		again, err := bot.Admit(ctx, "adm", "r-late")
		Expect(err).NotTo(HaveOccurred())
		Expect(again).To(Equal(res))
	})

	It("refuses to admit a withdrawn reply with NOT_ANSWERABLE, and the question stays answerable", func() {
		pending(bot, "wd")
		queue(ns, "wd", "r-wd", "prod")
		Expect(admin.Delete(ctx, &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-wd"}})).To(Succeed())
		Eventually(queuedReply(ns, "wd")).Should(BeEmpty())

		_, err := bot.Admit(ctx, "wd", "r-wd")
		Expect(codeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(err).To(MatchError("NOT_ANSWERABLE: reply r-wd is not queued on question wd"))
		q := question(ns, "wd")()
		Expect(q.Status.State).To(Equal(hitlv1.StateContinued))
		Expect(q.Spec.AdmittedReply).To(BeEmpty())
		queue(ns, "wd", "r-wd-2", "staging")
	})

	It("maps the API server's refusal of a stale admission to NOT_ANSWERABLE", func() {
		pending(bot, "stale")
		queue(ns, "stale", "r-stale", "prod")
		was := question(ns, "stale")().Status.QueuedReply
		Expect(admin.Delete(ctx, &hitlv1.QuestionReply{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r-stale"}})).To(Succeed())
		Eventually(queuedReply(ns, "stale")).Should(BeEmpty())

		stale := agent.New(&staleClient{WithWatch: admin, queued: was}, ns, "bot")
		_, err := stale.Admit(ctx, "stale", "r-stale")
		Expect(codeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the CRD's rule refused it: %v", err)
		Expect(err).To(MatchError(HavePrefix("NOT_ANSWERABLE: reply r-stale is not queued on question stale")))
		Expect(question(ns, "stale")().Spec.AdmittedReply).To(BeEmpty())
		Expect(state(ns, "stale")()).To(Equal(hitlv1.StateContinued))
	})

	It("refuses to wait for, admit on or cancel a missing question with NOT_ANSWERABLE", func() {
		_, err := bot.Admit(ctx, "nowhere", "r")
		Expect(codeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
		Expect(codeOf(bot.Cancel(ctx, "nowhere"))).To(Equal(hitlv1.CodeNotAnswerable))
		_, err = bot.Wait(ctx, "nowhere", func(*hitlv1.UserQuestion) bool { return true })
		Expect(codeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
	})

	It("refuses to admit a reply that is not queued, and cancels once", func() {
		blocking(bot, "open")
		_, err := bot.Admit(ctx, "open", "ghost")
		Expect(err).To(MatchError("NOT_ANSWERABLE: reply ghost is not queued on question open"))

		Expect(bot.Cancel(ctx, "open")).To(Succeed())
		Eventually(state(ns, "open")).Should(Equal(hitlv1.StateCancelled))
		Expect(bot.Cancel(ctx, "open")).To(Succeed())
		_, err = bot.Admit(ctx, "open", "ghost")
		Expect(err).To(MatchError("NOT_ANSWERABLE: question open is Cancelled"))
	})

	It("keeps streaming and waiting across expired and dropped watches", func() {
		flaky := &flakyClient{WithWatch: admin}
		bot := agent.New(flaky, ns, "bot")
		pending(bot, "one")
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		replies, err := bot.LateReplies(sctx)
		Expect(err).NotTo(HaveOccurred())
		queue(ns, "one", "r-one", "prod")
		Eventually(replies).Should(Receive(HaveField("Reply", "r-one")))

		By("listing again, without repeating a reply, when the resourceVersion expired")
		lists := flaky.lists.Load()
		flaky.expire()
		Eventually(flaky.lists.Load).Should(BeNumerically(">", lists))
		Consistently(replies, 300*time.Millisecond).ShouldNot(Receive())
		pending(bot, "two")
		queue(ns, "two", "r-two", "prod")
		Eventually(replies).Should(Receive(HaveField("Reply", "r-two")))

		By("resuming a dropped watch from its resourceVersion, without listing")
		lists, watches := flaky.lists.Load(), flaky.watches.Load()
		flaky.drop()
		Eventually(flaky.watches.Load).Should(BeNumerically(">", watches))
		Expect(flaky.lists.Load()).To(Equal(lists))

		By("waiting for an answer across both")
		watches = flaky.watches.Load()
		done := async(func() (agent.Result, error) { return bot.Ask(ctx, agent.Request{Name: "three", Questions: where()}) })
		Eventually(flaky.watches.Load).Should(BeNumerically(">", watches))
		flaky.expire()
		watches = flaky.watches.Load()
		Eventually(flaky.watches.Load).Should(BeNumerically(">=", watches+2))
		flaky.drop()
		answer(ns, "three", "r-three", "staging")
		var got asked
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res.Answers).To(Equal(chose("staging")))
		Consistently(replies, 200*time.Millisecond).ShouldNot(Receive())
	})
})
