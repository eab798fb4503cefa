package v1alpha1_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	. "github.com/hitl-dev/hitl/test/builders"
	"github.com/hitl-dev/hitl/test/testenv"
)

// deniedWith asserts that err is an Invalid denial one of whose causes
// carries a message starting with code, and returns that message.
func deniedWith(err error, code hitlv1.ErrorCode) string {
	GinkgoHelper()
	Expect(err).To(HaveOccurred(), "expected a denial with %s", code)
	Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected Invalid, got %v", err)
	status, ok := err.(apierrors.APIStatus)
	Expect(ok).To(BeTrue())
	for _, cause := range status.Status().Details.Causes {
		if msg, found := ruleMessage(cause.Message); found && strings.HasPrefix(msg, string(code)+": ") {
			return msg
		}
	}
	Fail("no cause starts with " + string(code) + ": " + err.Error())
	return ""
}

// invalidValue is what the API server puts before a CEL rule's message in a
// cause: "Invalid value: ", and for a scalar field the quoted value.
var invalidValue = regexp.MustCompile(`^Invalid value: ("(?:[^"\\]|\\.)*": )?`)

func ruleMessage(cause string) (string, bool) {
	loc := invalidValue.FindStringIndex(cause)
	if loc == nil {
		return "", false
	}
	return cause[loc[1]:], true
}

func newNamespace() string {
	GinkgoHelper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-"}}
	Expect(k8s.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

var _ = Describe("UserQuestion", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("accepts a well-formed ask and defaults origin to Root", func() {
		q := Question("ok", ns).Ask("env", "Where?", "staging", "prod").Ask("notes", "Notes?").Timeout(90 * time.Second).Obj()
		Expect(k8s.Create(ctx, q)).To(Succeed())
		Expect(q.Spec.Origin).To(Equal(hitlv1.OriginRoot))
	})

	DescribeTable("denies a bad ask with its code",
		func(code hitlv1.ErrorCode, fragment string, q *hitlv1.UserQuestion) {
			q.Namespace = ns
			msg := deniedWith(k8s.Create(ctx, q), code)
			Expect(msg).To(ContainSubstring(fragment))
		},
		Entry("no questions", hitlv1.CodeEmptyQuestions, "at least one question",
			Question("empty", "").Obj()),
		Entry("a subagent asking", hitlv1.CodeDelegatedCaller, "subagent",
			Question("sub", "").Ask("q", "Q?").Origin(hitlv1.OriginSubagent).Obj()),
		Entry("a zero timeout", hitlv1.CodeBadTimeout, "positive",
			Question("t0", "").Ask("q", "Q?").Timeout(0).Obj()),
		Entry("a negative timeout", hitlv1.CodeBadTimeout, "positive",
			Question("tneg", "").Ask("q", "Q?").Timeout(-time.Second).Obj()),
		Entry("a fractional-millisecond timeout", hitlv1.CodeBadTimeout, "whole milliseconds",
			Question("tfrac", "").Ask("q", "Q?").Timeout(1500*time.Microsecond).Obj()),
		Entry("a fractional-millisecond timeout in seconds", hitlv1.CodeBadTimeout, "whole milliseconds",
			Question("tfracs", "").Ask("q", "Q?").Timeout(1500*time.Microsecond+time.Second).Obj()),
		Entry("PlanReview without a plan", hitlv1.CodeBadIntent, "question plan: a PlanReview intent needs the plan in detail",
			Question("pr1", "").Ask("plan", "Run it?", "yes", "no").PlanReview("yes").Obj()),
		Entry("PlanReview approving with no option", hitlv1.CodeBadIntent, "question plan: intent.planReview.approve must name one of the options",
			Question("pr2", "").Ask("plan", "Run it?", "yes", "no").Detail("1. do it").PlanReview("ship").Obj()),
		Entry("PlanReview without its settings", hitlv1.CodeBadIntent, "takes intent.planReview",
			withIntent(Question("pr3", "").Ask("plan", "Run it?", "yes").Detail("x").Obj(), &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview})),
		Entry("Approval with a timeout", hitlv1.CodeBadIntent, "no spec.timeout",
			Question("ap1", "").Ask("a", "May I?", "allow", "deny").Approval("allow", "deny", "").Timeout(time.Minute).Obj()),
		Entry("Approval with a second question", hitlv1.CodeBadIntent, "exactly one question",
			Question("ap2", "").Ask("a", "May I?", "allow", "deny").Approval("allow", "deny", "").Ask("b", "Why?").Obj()),
		Entry("Approval that is multiSelect", hitlv1.CodeBadIntent, "question a: an Approval question cannot be multiSelect",
			Question("ap3", "").Ask("a", "May I?", "allow", "deny").Multi().Approval("allow", "deny", "").Obj()),
		Entry("Approval with the same label twice", hitlv1.CodeBadIntent, "question a: approval approve, reject and always must be distinct",
			Question("ap4", "").Ask("a", "May I?", "allow", "deny").Approval("allow", "allow", "").Obj()),
		Entry("Approval with an extra option", hitlv1.CodeBadIntent, "question a: approval approve, reject and always must be exactly the option labels",
			Question("ap5", "").Ask("a", "May I?", "allow", "deny", "later").Approval("allow", "deny", "").Obj()),
		Entry("Approval missing its always option", hitlv1.CodeBadIntent, "exactly the option labels",
			Question("ap6", "").Ask("a", "May I?", "allow", "deny").Approval("allow", "deny", "always").Obj()),
		Entry("Approval display without en", hitlv1.CodeBadIntent, "en entry",
			withDisplay(Question("ap7", "").Ask("a", "May I?", "allow", "deny").Approval("allow", "deny", "").Obj(), hitlv1.LocalizedText{"de": "Darf ich?"})),
		Entry("an approval rule's set named like a policy's (with a slash)", hitlv1.CodeBadIntent, "from[].name) is a DNS label",
			withRule(Question("ar1", "").Ask("a", "Q?").Obj(), hitlv1.ApprovalRule{Approvals: 1, From: []hitlv1.ApproverSet{{Name: "prod/sre", Groups: []string{"sre"}, Minimum: 1}}})),
		Entry("an approval rule's set minimum above its approvals", hitlv1.CodeBadIntent, "may not exceed approvals",
			withRule(Question("ar2", "").Ask("a", "Q?").Obj(), hitlv1.ApprovalRule{Approvals: 1, From: []hitlv1.ApproverSet{{Name: "sre", Groups: []string{"sre"}, Minimum: 2}}})),
		Entry("an approval rule's set naming nobody", hitlv1.CodeBadIntent, "names groups or users",
			withRule(Question("ar3", "").Ask("a", "Q?").Obj(), hitlv1.ApprovalRule{Approvals: 1, From: []hitlv1.ApproverSet{{Name: "sre", Minimum: 1}}})),
	)

	It("accepts a valid Approval with always and a PlanReview", func() {
		Expect(k8s.Create(ctx, Question("ap", ns).Ask("a", "May I?", "allow", "deny", "always").Approval("allow", "deny", "always").Obj())).To(Succeed())
		Expect(k8s.Create(ctx, Question("pr", ns).Ask("plan", "Run it?", "yes", "no").Detail("1. do it").PlanReview("yes").Obj())).To(Succeed())
		for i, d := range []time.Duration{time.Millisecond, 1500 * time.Millisecond, 90 * time.Minute, 36*time.Hour + time.Millisecond} {
			Expect(k8s.Create(ctx, Question(fmt.Sprintf("t%d", i), ns).Ask("q", "Q?").Timeout(d).Obj())).To(Succeed(), d.String())
		}
	})

	It("denies duplicate question ids and option labels", func() {
		err := k8s.Create(ctx, Question("dup", ns).Ask("q", "A?").Ask("q", "B?").Obj())
		Expect(apierrors.IsInvalid(err)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("spec.questions[1]: Duplicate value"))
		err = k8s.Create(ctx, Question("dupopt", ns).Ask("q", "A?", "x", "x").Obj())
		Expect(apierrors.IsInvalid(err)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("spec.questions[0].options[1]: Duplicate value"))
	})

	Describe("immutability", func() {
		var q *hitlv1.UserQuestion
		BeforeEach(func() {
			q = Question("imm", ns).Ask("q", "Q?", "a", "b").Timeout(time.Minute).Obj()
			Expect(k8s.Create(ctx, q)).To(Succeed())
		})

		DescribeTable("denies changes to the ask",
			func(mutate func(*hitlv1.UserQuestion), fragment string) {
				changed := q.DeepCopy()
				mutate(changed)
				err := k8s.Update(ctx, changed)
				Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
				Expect(err.Error()).To(ContainSubstring(fragment))
			},
			Entry("agent", func(q *hitlv1.UserQuestion) { q.Spec.Agent = "other" }, "spec.agent is immutable"),
			Entry("questions", func(q *hitlv1.UserQuestion) { q.Spec.Questions[0].Question = "Changed?" }, "spec.questions is immutable"),
			Entry("timeout", func(q *hitlv1.UserQuestion) { q.Spec.Timeout.Duration = time.Hour }, "spec.timeout is immutable"),
			Entry("timeout removed", func(q *hitlv1.UserQuestion) { q.Spec.Timeout = nil }, "are immutable"),
			Entry("askedAt added", func(q *hitlv1.UserQuestion) { q.Spec.AskedAt = ptr.To(metav1.NowMicro()) }, "are immutable"),
			Entry("admittedReply naming no queued reply", func(q *hitlv1.UserQuestion) { q.Spec.AdmittedReply = "r" }, "must name the reply queued"),
		)

		It("keeps spec.askedAt as the client wrote it, to the microsecond, and immutable", func() {
			at := metav1.NewMicroTime(time.Date(2031, 1, 2, 3, 4, 5, 678901000, time.UTC))
			q := Question("precise", ns).Ask("q", "Q?").Timeout(time.Minute).Obj()
			q.Spec.AskedAt = &at
			Expect(k8s.Create(ctx, q)).To(Succeed())
			Expect(q.Spec.AskedAt.Time.Equal(at.Time)).To(BeTrue(), "got %s", q.Spec.AskedAt)
			q.Spec.AskedAt = ptr.To(metav1.NewMicroTime(at.Add(time.Second)))
			err := k8s.Update(ctx, q)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring("spec.askedAt is immutable"))
		})

		It("lets cancelled go from false to true, never back", func() {
			q.Spec.Cancelled = true
			Expect(k8s.Update(ctx, q)).To(Succeed())
			q.Spec.Cancelled = false
			err := k8s.Update(ctx, q)
			Expect(apierrors.IsInvalid(err)).To(BeTrue())
			Expect(err.Error()).To(ContainSubstring("spec.cancelled may only go from false to true"))
		})

		It("lets admittedReply be set once, to the queued reply", func() {
			q.Status.State = hitlv1.StateContinued
			q.Status.QueuedReply = &hitlv1.QueuedReply{Name: "late", QueuedAt: metav1.NowMicro(),
				Answers: []hitlv1.AnswerItem{{ID: "q", Selected: []string{"a"}}}}
			Expect(k8s.Status().Update(ctx, q)).To(Succeed())

			q.Spec.AdmittedReply = "other"
			Expect(k8s.Update(ctx, q)).To(MatchError(ContainSubstring("must name the reply queued")))
			q.Spec.AdmittedReply = "late"
			Expect(k8s.Update(ctx, q)).To(Succeed())
			q.Spec.AdmittedReply = "again"
			Expect(k8s.Update(ctx, q)).To(MatchError(ContainSubstring("spec.admittedReply may be set once")))
		})
	})
})

var _ = Describe("QuestionReply", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("reads as in progress to kstatus until the controller judges it: status.observedGeneration 0 below generation 1", func() {
		Expect(k8s.Create(ctx, Reply("fresh", ns, "q").Select("env", "staging").Obj())).To(Succeed())
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(hitlv1.GroupVersion.String())
		u.SetKind("QuestionReply")
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fresh"}, u)).To(Succeed())
		observed, found, err := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
		Expect(err).NotTo(HaveOccurred())
		Expect(found).To(BeTrue(), "kstatus reads a reply without status.observedGeneration as current")
		Expect(observed).To(BeNumerically("<", u.GetGeneration()))
	})

	It("accepts a batch and keeps its spec immutable", func() {
		r := Reply("r", ns, "q").Select("env", "staging").Custom("notes", "none").Obj()
		Expect(k8s.Create(ctx, r)).To(Succeed())
		r.Spec.Answers[0].Selected = []string{"prod"}
		err := k8s.Update(ctx, r)
		Expect(apierrors.IsInvalid(err)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("spec is immutable"))
	})

	DescribeTable("denies a batch that is bad on its own with BAD_ANSWER",
		func(r *hitlv1.QuestionReply, fragment string) {
			r.Namespace = ns
			Expect(deniedWith(k8s.Create(ctx, r), hitlv1.CodeBadAnswer)).To(ContainSubstring(fragment))
		},
		Entry("no answers", Reply("none", "", "q").Obj(), "one item per question"),
		Entry("every question skipped", Reply("skip", "", "q").Skip("a").Skip("b").Obj(), "not all of them"),
	)

	It("denies duplicate answer ids", func() {
		err := k8s.Create(ctx, Reply("dupid", ns, "q").Select("a", "x").Select("a", "y").Obj())
		Expect(apierrors.IsInvalid(err)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("spec.answers[1]: Duplicate value"))
		err = k8s.Create(ctx, Reply("duplabel", ns, "q").Select("a", "x", "x").Obj())
		Expect(apierrors.IsInvalid(err)).To(BeTrue())
		Expect(err.Error()).To(ContainSubstring("spec.answers[0].selected[1]: Duplicate value"))
	})
})

// The samples under config/samples are the README's tour: the good ones
// apply, and each one under config/samples/invalid is refused with the code
// its file name starts with.
var _ = Describe("config/samples", func() {
	It("accepts every good sample", func() {
		ns := newNamespace()
		files, err := filepath.Glob(filepath.Join(testenv.Root(), "config", "samples", "hitl_*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(files).NotTo(BeEmpty())
		for _, f := range files {
			Expect(k8s.Create(ctx, sample(f, ns))).To(Succeed(), f)
		}
	})

	It("refuses every invalid sample with the code of its file name", func() {
		ns := newNamespace()
		files, err := filepath.Glob(filepath.Join(testenv.Root(), "config", "samples", "invalid", "*.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(len(files)).To(BeNumerically(">=", 5))
		seen := map[hitlv1.ErrorCode]bool{}
		for _, f := range files {
			code := codeOfFile(f)
			By(filepath.Base(f) + " → " + string(code))
			deniedWith(k8s.Create(ctx, sample(f, ns)), code)
			seen[code] = true
		}
		Expect(seen).To(HaveKey(hitlv1.CodeEmptyQuestions))
		Expect(seen).To(HaveKey(hitlv1.CodeBadIntent))
		Expect(seen).To(HaveKey(hitlv1.CodeBadTimeout))
		Expect(seen).To(HaveKey(hitlv1.CodeDelegatedCaller))
		Expect(seen).To(HaveKey(hitlv1.CodeBadAnswer))
	})
})

func sample(file, ns string) *unstructured.Unstructured {
	GinkgoHelper()
	data, err := os.ReadFile(file)
	Expect(err).NotTo(HaveOccurred())
	u := &unstructured.Unstructured{}
	Expect(yaml.Unmarshal(data, &u.Object)).To(Succeed(), file)
	u.SetNamespace(ns)
	return u
}

// codeOfFile maps "bad-intent-approval-timed.yaml" to BAD_INTENT.
func codeOfFile(file string) hitlv1.ErrorCode {
	name := strings.ToUpper(strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".yaml"), "-", "_"))
	for _, code := range []hitlv1.ErrorCode{hitlv1.CodeEmptyQuestions, hitlv1.CodeBadIntent, hitlv1.CodeBadTimeout,
		hitlv1.CodeDelegatedCaller, hitlv1.CodeBadAnswer} {
		if strings.HasPrefix(name, string(code)) {
			return code
		}
	}
	Fail("no code in sample name " + file)
	return ""
}

func withIntent(q *hitlv1.UserQuestion, in *hitlv1.QuestionIntent) *hitlv1.UserQuestion {
	q.Spec.Questions[0].Intent = in
	return q
}

func withDisplay(q *hitlv1.UserQuestion, text hitlv1.LocalizedText) *hitlv1.UserQuestion {
	q.Spec.Questions[0].Intent.Approval.Display = &hitlv1.ApprovalDisplay{Question: text}
	return q
}

// withRule gives q the agent's own approval rule.
func withRule(q *hitlv1.UserQuestion, rule hitlv1.ApprovalRule) *hitlv1.UserQuestion {
	q.Spec.Approval = &rule
	return q
}
