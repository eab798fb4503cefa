package answerer_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/answerer"
	. "github.com/hitl-dev/hitl/test/builders"
)

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "answerer-"}}
	Expect(admin.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// ask creates a question as its agent would.
func ask(q *hitlv1.UserQuestion) *hitlv1.UserQuestion {
	GinkgoHelper()
	Expect(admin.Create(ctx, q)).To(Succeed())
	return q
}

// where is a one-question ask of agent for env: staging or prod.
func where(name, ns, agent string) *QuestionBuilder {
	return Question(name, ns).Agent(agent).Ask("env", "Where?", "staging", "prod")
}

func staging() []hitlv1.AnswerItem {
	return []hitlv1.AnswerItem{{ID: "env", Selected: []string{"staging"}}}
}

func question(ns, name string) func() *hitlv1.UserQuestion {
	return func() *hitlv1.UserQuestion {
		q := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, q)).To(Succeed())
		return q
	}
}

func state(ns, name string) func() hitlv1.QuestionState {
	return func() hitlv1.QuestionState { return question(ns, name)().Status.State }
}

func replies(ns string) []hitlv1.QuestionReply {
	GinkgoHelper()
	var list hitlv1.QuestionReplyList
	Expect(admin.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// claimed returns a function that reads the QuestionClaim's error, nil
// while it exists.
func claimed(ns, name string) func() error {
	return func() error {
		return admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &hitlv1.QuestionClaim{})
	}
}

func getClaim(ns, name string) *hitlv1.QuestionClaim {
	GinkgoHelper()
	c := &hitlv1.QuestionClaim{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, c)).To(Succeed())
	return c
}

func notFound() OmegaMatcher { return WithTransform(apierrors.IsNotFound, BeTrue()) }

// stream starts a watch that ends with the test.
func stream(a *answerer.Answerer) <-chan answerer.Event {
	GinkgoHelper()
	wctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	ch, err := a.Watch(wctx)
	Expect(err).NotTo(HaveOccurred())
	return ch
}

// until receives events until one matches, and returns all it received.
func until(ch <-chan answerer.Event, match func(answerer.Event) bool) []answerer.Event {
	GinkgoHelper()
	var seen []answerer.Event
	for {
		var ev answerer.Event
		Eventually(ch).Should(Receive(&ev), "events so far: %v", names(seen))
		seen = append(seen, ev)
		if match(ev) {
			return seen
		}
	}
}

func is(typ watch.EventType, name string) func(answerer.Event) bool {
	return func(ev answerer.Event) bool { return ev.Type == typ && ev.Question.Name == name }
}

func names(events []answerer.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, string(ev.Type)+" "+ev.Question.Name)
	}
	return out
}

func questionsIn(events []answerer.Event) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.Question.Name)
	}
	return out
}

var _ = Describe("Watch", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("sees the existing and new questions of its agents only, and their changes", func() {
		ask(where("a1", ns, "alice").Obj())
		ask(where("b1", ns, "bob").Obj())
		a := answerer.New(watcher, ns, "inbox", "alice")
		ch := stream(a)

		first := until(ch, func(answerer.Event) bool { return true })
		Expect(first[0].Type).To(Equal(watch.Added))
		Expect(first[0].Question.Name).To(Equal("a1"))

		// Events come in the order of the writes: had bob's b2 been
		// selected, it would arrive before alice's a2.
		ask(where("b2", ns, "bob").Obj())
		ask(where("a2", ns, "alice").Obj())
		seen := until(ch, is(watch.Added, "a2"))

		out, err := a.Reply(ctx, "a1", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied))
		seen = append(seen, until(ch, func(ev answerer.Event) bool {
			return ev.Type == watch.Modified && ev.Question.Name == "a1" && ev.Question.Status.State == hitlv1.StateSettled
		})...)
		Expect(questionsIn(seen)).NotTo(ContainElements("b1", "b2"))
		Expect(questionsIn(first)).NotTo(ContainElements("b1", "b2"))
	})

	It("sees every agent's questions when it names none", func() {
		ask(where("a1", ns, "alice").Obj())
		ask(where("b1", ns, "bob").Obj())
		ch := stream(answerer.New(watcher, ns, "inbox"))
		until(ch, is(watch.Added, "a1"))
		ask(where("c1", ns, "carol").Obj())
		Expect(questionsIn(until(ch, is(watch.Added, "c1")))).To(ContainElement("b1"))
	})

	It("sends Deleted for a question that goes", func() {
		q := ask(where("a1", ns, "alice").Obj())
		ch := stream(answerer.New(watcher, ns, "inbox", "alice"))
		until(ch, is(watch.Added, "a1"))
		Expect(admin.Delete(ctx, q)).To(Succeed())
		until(ch, is(watch.Deleted, "a1"))
	})

	It("closes the channel when its context ends", func() {
		wctx, cancel := context.WithCancel(ctx)
		ch, err := answerer.New(watcher, ns, "inbox", "alice").Watch(wctx)
		Expect(err).NotTo(HaveOccurred())
		cancel()
		Eventually(ch).Should(BeClosed())
	})

	It("resumes from the last version, without listing again, when the API server closes the watch", func() {
		ask(where("a1", ns, "alice").Obj())
		// The controller's first status write then comes before the list.
		Eventually(state(ns, "a1")).Should(Equal(hitlv1.StateOpen))
		var mu sync.Mutex
		var lists int
		var versions []string
		c := interceptor.NewClient(watcher, interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				mu.Lock()
				lists++
				mu.Unlock()
				return c.List(ctx, list, opts...)
			},
			Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
				mu.Lock()
				defer mu.Unlock()
				rv := (&client.ListOptions{}).ApplyOptions(opts).Raw.ResourceVersion
				versions = append(versions, rv)
				if len(versions) == 1 {
					// The API server ends a watch at its timeout, after a
					// bookmark at the version it had reached.
					closed := watch.NewFakeWithChanSize(1, false)
					closed.Action(watch.Bookmark, &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}})
					closed.Stop()
					return closed, nil
				}
				return c.Watch(ctx, list, opts...)
			},
		})
		ch := stream(answerer.New(c, ns, "inbox", "alice"))
		ask(where("a2", ns, "alice").Obj())
		seen := until(ch, is(watch.Added, "a2"))
		Expect(names(seen)).To(HaveExactElements("ADDED a1", "ADDED a2"))

		mu.Lock()
		defer mu.Unlock()
		Expect(lists).To(Equal(1))
		Expect(versions).To(HaveLen(2))
		Expect(versions[1]).To(Equal(versions[0]))
	})

	It("lists again when the watch expires, and reports what it missed", func() {
		ask(where("a1", ns, "alice").Obj())
		gone := ask(where("a2", ns, "alice").Obj())
		var watches atomic.Int32
		c := interceptor.NewClient(watcher, interceptor.Funcs{
			Watch: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
				if watches.Add(1) > 1 {
					return c.Watch(ctx, list, opts...)
				}
				// While the watch is away, a2 goes and a3 comes; then it expires.
				if err := admin.Delete(ctx, gone); err != nil {
					return nil, err
				}
				if err := admin.Create(ctx, where("a3", ns, "alice").Obj()); err != nil {
					return nil, err
				}
				expired := watch.NewFakeWithChanSize(1, false)
				expired.Error(&apierrors.NewResourceExpired("too old resource version").ErrStatus)
				return expired, nil
			},
		})
		ch := stream(answerer.New(c, ns, "inbox", "alice"))
		// The list after the expiry reports both changes it found; the
		// order between two questions' events is not promised (client-go
		// sends the deletions a list finds first).
		seen := until(ch, func(ev answerer.Event) bool {
			return is(watch.Deleted, "a2")(ev) || is(watch.Added, "a3")(ev)
		})
		if last := seen[len(seen)-1]; last.Type == watch.Deleted {
			seen = append(seen, until(ch, is(watch.Added, "a3"))...)
		} else {
			seen = append(seen, until(ch, is(watch.Deleted, "a2"))...)
		}
		Expect(names(seen)).To(ContainElements("ADDED a1", "ADDED a2", "ADDED a3"))
		Expect(names(seen)).To(ContainElement("DELETED a2"))
		for _, added := range []string{"ADDED a1", "ADDED a2", "ADDED a3"} {
			Expect(names(seen)).To(ContainElement(added), "%s is missing: %v", added, names(seen))
			Expect(slices.DeleteFunc(names(seen), func(n string) bool { return n != added })).To(HaveLen(1), "%s sent twice: %v", added, names(seen))
		}
		Eventually(watches.Load).Should(BeNumerically(">=", 2), "it watches again after the list")
	})
})

var _ = Describe("Reply", func() {
	var (
		ns string
		a  *answerer.Answerer
	)
	BeforeEach(func() {
		ns = newNamespace()
		a = answerer.New(watcher, ns, "inbox", "bot")
	})

	It("settles an Open question: Applied", func() {
		ask(where("q", ns, "bot").Timeout(time.Minute).Obj())
		out, err := a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied))
		Expect(out.Err()).NotTo(HaveOccurred())

		q := question(ns, "q")()
		Expect(q.Status.State).To(Equal(hitlv1.StateSettled))
		Expect(q.Status.Answers).To(Equal(staging()))
		Expect(q.Status.Settlement.Reply).To(Equal(out.Reply))
		Expect(q.Status.Settlement.Late).To(BeFalse())
	})

	It("queues a reply to a Continued question, and the controller rejects a second one with REPLY_QUEUED", func() {
		ask(where("q", ns, "bot").Timeout(100 * time.Millisecond).Obj())
		Eventually(state(ns, "q")).Should(Equal(hitlv1.StateContinued))

		out, err := a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeQueued))
		Expect(question(ns, "q")().Status.QueuedReply.Name).To(Equal(out.Reply))

		// Without the optional feedback webhook the reply is admitted, and
		// the controller rejects it; the queued one stays.
		second, err := a.Reply(ctx, "q", []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}})
		Expect(err).NotTo(HaveOccurred())
		Expect(second.Outcome).To(Equal(hitlv1.OutcomeRejected))
		Expect(validation.CodeOf(second.Err())).To(Equal(hitlv1.CodeReplyQueued), "got %v", second.Err())
		Expect(second.Message).To(HavePrefix("REPLY_QUEUED: "))
		Expect(question(ns, "q")().Status.QueuedReply.Name).To(Equal(out.Reply))
	})

	It("refuses a bad batch locally with BAD_ANSWER and creates nothing", func() {
		ask(where("q", ns, "bot").Obj())
		_, err := a.Reply(ctx, "q", []hitlv1.AnswerItem{{ID: "env", Selected: []string{"moon"}}})
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeBadAnswer))
		Expect(err.Error()).To(ContainSubstring("question env"))
		Expect(replies(ns)).To(BeEmpty())
	})

	It("refuses a reply to a missing question with NOT_ANSWERABLE", func() {
		_, err := a.Reply(ctx, "nope", staging())
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(replies(ns)).To(BeEmpty())
	})

	It("lets one of two racing replies win; the other is NOT_ANSWERABLE", func() {
		ask(where("q", ns, "bot").Obj())
		type result struct {
			out answerer.Outcome
			err error
		}
		results := make(chan result, 2)
		for range 2 {
			go func() {
				out, err := a.Reply(ctx, "q", staging())
				results <- result{out, err}
			}()
		}
		applied, refused := 0, 0
		for range 2 {
			var r result
			Eventually(results).Should(Receive(&r))
			if r.err == nil && r.out.Outcome == hitlv1.OutcomeApplied {
				applied++
				continue
			}
			// Refused by the webhook, or rejected by the controller.
			err := r.err
			if err == nil {
				err = r.out.Err()
			}
			Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable), "got %+v", r)
			refused++
		}
		Expect([]int{applied, refused}).To(Equal([]int{1, 1}))
	})

	It("creates a reply the caller built, under its name", func() {
		ask(where("q", ns, "bot").Obj())
		r := Reply("manual", "", "q").Select("env", "prod").AnsweredBy("mallory").Obj()
		out, err := a.Create(ctx, r)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(Equal(answerer.Outcome{Reply: "manual", Outcome: hitlv1.OutcomeApplied, Message: out.Message}))
		Expect(r.Namespace).To(Equal(ns))
		Expect(r.Spec.AnsweredBy.Username).NotTo(Equal("mallory"), "admission stamps the real user")
		Expect(r.Labels).To(HaveKeyWithValue(hitlv1.AgentLabel, "bot"))
	})

	It("binds the reply to the question it read, and creates nothing for a question re-created under its name", func() {
		first := ask(where("q", ns, "bot").Obj())
		r := Reply("bound", "", "q").Select("env", "staging").Obj()
		out, err := a.Create(ctx, r)
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied))
		Expect(r.Spec.QuestionRef.UID).To(Equal(first.UID))

		// The question is deleted and asked again under its name: a reply
		// prepared for the first one is refused before it is created.
		Expect(admin.Delete(ctx, first)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(first), &hitlv1.UserQuestion{}))
		}).Should(BeTrue())
		second := ask(where("q", ns, "bot").Obj())
		Expect(second.UID).NotTo(Equal(first.UID))
		stale := Reply("stale", "", "q").Select("env", "prod").Obj()
		stale.Spec.QuestionRef.UID = first.UID
		_, err = a.Create(ctx, stale)
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(err.Error()).To(ContainSubstring("replaced"))
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(stale), &hitlv1.QuestionReply{})).NotTo(Succeed())
		// The new question may not have had its first look yet: it is
		// Open once it has, and nothing settled it.
		Eventually(func() hitlv1.QuestionState { return question(ns, "q")().Status.State }).Should(Equal(hitlv1.StateOpen))
	})
})

var _ = Describe("Outcome.Err", func() {
	It("is nil unless the reply was Rejected", func() {
		for _, o := range []hitlv1.ReplyOutcome{hitlv1.OutcomeApplied, hitlv1.OutcomeQueued, hitlv1.OutcomeAdmitted} {
			Expect(answerer.Outcome{Outcome: o}.Err()).To(BeNil())
		}
	})

	It("carries the reason as the code and the message as the rule", func() {
		msg := "NOT_ANSWERABLE: question q is Settled"
		err := answerer.Outcome{Outcome: hitlv1.OutcomeRejected, Reason: hitlv1.CodeNotAnswerable, Message: msg}.Err()
		var coded *validation.Error
		Expect(err).To(BeAssignableToTypeOf(coded))
		Expect(err.(*validation.Error).Rule).To(Equal("question q is Settled"))
		Expect(err.Error()).To(Equal(msg))
	})
})

var _ = Describe("Withdraw", func() {
	var (
		ns string
		a  *answerer.Answerer
	)
	BeforeEach(func() {
		ns = newNamespace()
		a = answerer.New(watcher, ns, "inbox", "bot")
	})

	queued := func() answerer.Outcome {
		GinkgoHelper()
		ask(where("q", ns, "bot").Timeout(100 * time.Millisecond).Obj())
		Eventually(state(ns, "q")).Should(Equal(hitlv1.StateContinued))
		out, err := a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeQueued))
		return out
	}

	It("withdraws a queued reply: the question stays Continued and answerable", func() {
		out := queued()
		Expect(a.Withdraw(ctx, out.Reply)).To(Succeed())
		Eventually(func() *hitlv1.QueuedReply { return question(ns, "q")().Status.QueuedReply }).Should(BeNil())
		Expect(state(ns, "q")()).To(Equal(hitlv1.StateContinued))

		again, err := a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Outcome).To(Equal(hitlv1.OutcomeQueued))
	})

	It("refuses an applied reply with NOT_ANSWERABLE", func() {
		ask(where("q", ns, "bot").Obj())
		out, err := a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied))

		err = a.Withdraw(ctx, out.Reply)
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		Expect(err.Error()).To(ContainSubstring("is Applied"))
		Expect(replies(ns)).To(HaveLen(1))
	})

	It("refuses a reply the agent admitted with NOT_ANSWERABLE", func() {
		out := queued()
		q := question(ns, "q")()
		q.Spec.AdmittedReply = out.Reply
		Expect(admin.Update(ctx, q)).To(Succeed())

		Expect(validation.CodeOf(a.Withdraw(ctx, out.Reply))).To(Equal(hitlv1.CodeNotAnswerable))
		Eventually(state(ns, "q")).Should(Equal(hitlv1.StateSettled))
		Expect(question(ns, "q")().Status.Settlement.Late).To(BeTrue())
	})

	It("refuses a missing reply with NOT_ANSWERABLE", func() {
		Expect(validation.CodeOf(a.Withdraw(ctx, "nope"))).To(Equal(hitlv1.CodeNotAnswerable))
	})
})

var _ = Describe("Claim", func() {
	var (
		ns string
		a  *answerer.Answerer
	)
	BeforeEach(func() {
		ns = newNamespace()
		a = answerer.New(watcher, ns, "alice-inbox", "bot")
	})

	It("holds a timed question open past its deadline while it renews, and lets it continue when closed", func() {
		// A 4 s window: the claim must be made inside it, which a loaded
		// machine may take a while to do.
		ask(where("q", ns, "bot").Timeout(4 * time.Second).Obj())
		claim, err := a.Claim(ctx, "q", 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(claim.Close)
		Expect(claim.Remaining).To(And(BeNumerically(">", 0), BeNumerically("<=", 4*time.Second)))
		Expect(claim.Deadline).NotTo(BeZero())

		c := getClaim(ns, claim.Name)
		uid := question(ns, "q")().UID
		Expect(c.Labels).To(Equal(map[string]string{hitlv1.QuestionLabel: "q", hitlv1.AgentLabel: "bot"}))
		Expect(c.OwnerReferences).To(HaveLen(1))
		Expect(c.OwnerReferences[0].UID).To(Equal(uid))
		Expect(c.OwnerReferences[0].BlockOwnerDeletion).To(BeNil())
		Expect(c.Spec.QuestionRef).To(Equal(hitlv1.QuestionReference{Name: "q", UID: uid}))
		Expect(c.Spec.Agent).To(Equal("bot"))
		Expect(c.Spec.DurationSeconds).To(Equal(int32(5)))
		Expect(c.Spec.Holder).NotTo(BeNil(), "the API server stamps the holder")
		Expect(c.Spec.Holder.Username).NotTo(Equal("alice-inbox"), "the Answerer's name is not a holder")
		Eventually(func() []hitlv1.ClaimHolder { return question(ns, "q")().Status.Claims }).
			Should(ContainElement(hitlv1.ClaimHolder{Name: claim.Name, Holder: c.Spec.Holder.Username}))
		created := c.Spec.RenewTime.Time

		// Past the deadline and past one claim duration: only renewals keep it live.
		Consistently(state(ns, "q"), 6*time.Second).Should(Equal(hitlv1.StateOpen))
		Expect(getClaim(ns, claim.Name).Spec.RenewTime.Time).To(BeTemporally(">", created.Add(3*time.Second)))

		Expect(claim.Close()).To(Succeed())
		// Left to expire, the claim renewed at most 5/3 s ago would hold
		// the window at least 3.3 s more.
		Eventually(state(ns, "q"), 2500*time.Millisecond).Should(Equal(hitlv1.StateContinued))
		Expect(claimed(ns, claim.Name)()).To(notFound())
		Expect(claim.Close()).To(Succeed(), "Close is idempotent")
	})

	It("is released when its context ends", func() {
		ask(where("q", ns, "bot").Timeout(time.Minute).Obj())
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		claim, err := a.Claim(cctx, "q", 30*time.Second)
		Expect(err).NotTo(HaveOccurred())
		holders := func() []hitlv1.ClaimHolder { return question(ns, "q")().Status.Claims }
		Eventually(holders).Should(HaveLen(1))

		cancel()
		Eventually(claimed(ns, claim.Name)).Should(notFound())
		Expect(claim.Close()).To(Succeed())
		Eventually(holders).Should(BeEmpty())
	})

	It("reports no window left on a blocking question and clamps the claim's duration", func() {
		ask(where("q", ns, "bot").Obj())
		short, err := a.Claim(ctx, "q", time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(short.Close)
		Expect(short.Remaining).To(BeZero())
		Expect(short.Deadline).To(BeZero())
		Expect(getClaim(ns, short.Name).Spec.DurationSeconds).To(Equal(int32(5)))

		long, err := a.Claim(ctx, "q", time.Hour)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(long.Close)
		Expect(getClaim(ns, long.Name).Spec.DurationSeconds).To(Equal(int32(300)))
	})

	It("reports no window left on a Continued question", func() {
		ask(where("q", ns, "bot").Timeout(100 * time.Millisecond).Obj())
		Eventually(state(ns, "q")).Should(Equal(hitlv1.StateContinued))
		claim, err := a.Claim(ctx, "q", 5*time.Second)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(claim.Close)
		Expect(claim.Remaining).To(BeZero())
		Expect(claim.Deadline).NotTo(BeZero())
	})

	It("refuses a missing or settled question with NOT_ANSWERABLE", func() {
		_, err := a.Claim(ctx, "nope", 5*time.Second)
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))

		ask(where("q", ns, "bot").Obj())
		_, err = a.Reply(ctx, "q", staging())
		Expect(err).NotTo(HaveOccurred())
		_, err = a.Claim(ctx, "q", 5*time.Second)
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeNotAnswerable))
		var claims hitlv1.QuestionClaimList
		Expect(admin.List(ctx, &claims, client.InNamespace(ns))).To(Succeed())
		Expect(claims.Items).To(BeEmpty())
	})

	It("renews every third of its duration on its clock, and stops when its QuestionClaim is gone", func() {
		clk := clocktesting.NewFakeClock(time.Now())
		var patches atomic.Int32
		a = answerer.New(interceptor.NewClient(watcher, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
				patches.Add(1)
				return c.Patch(ctx, obj, patch, opts...)
			},
		}), ns, "alice-inbox", "bot")
		a.Clock = clk
		ask(where("q", ns, "bot").Obj())
		claim, err := a.Claim(ctx, "q", 6*time.Second)
		Expect(err).NotTo(HaveOccurred())
		Eventually(clk.HasWaiters).Should(BeTrue())

		clk.Step(2 * time.Second)
		Eventually(func() time.Time { return getClaim(ns, claim.Name).Spec.RenewTime.Time }).
			Should(BeTemporally("~", clk.Now(), time.Millisecond))
		Expect(patches.Load()).To(Equal(int32(1)))

		Expect(admin.Delete(ctx, getClaim(ns, claim.Name))).To(Succeed())
		clk.Step(2 * time.Second)
		Eventually(patches.Load).Should(Equal(int32(2)))
		clk.Step(2 * time.Second)
		Consistently(patches.Load, 300*time.Millisecond).Should(Equal(int32(2)))
		Expect(claim.Close()).To(Succeed())
	})
})
