package answerer_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/answerer"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

func bound(v intstr.IntOrString) *intstr.IntOrString { return &v }

// typedQuestions are the questions of an ask with typed answers: an
// integer from 1 to 10 (required), a number, a boolean, a date, a date and
// time, and a sensitive token of the form sk-... of 20 to 40 characters.
func typedQuestions() []hitlv1.Question {
	return []hitlv1.Question{
		{ID: "replicas", Question: "How many replicas?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger,
			Minimum: bound(intstr.FromInt32(1)), Maximum: bound(intstr.FromInt32(10)), Required: true}},
		{ID: "ratio", Question: "Canary ratio?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputNumber, Maximum: bound(intstr.FromString("0.5"))}},
		{ID: "dry", Question: "Dry run?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputBoolean}},
		{ID: "day", Question: "Which day?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputDate}},
		{ID: "at", Question: "At what time?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputDateTime}},
		{ID: "token", Question: "The registry token?", Sensitive: true, Input: &hitlv1.AnswerInput{Type: hitlv1.InputString,
			MinLength: ptr.To[int32](20), MaxLength: ptr.To[int32](40), Pattern: "^sk-"}},
	}
}

// full is a batch of every question of typedQuestions, in order: the
// items given, and the others skipped.
func full(items ...hitlv1.AnswerItem) []hitlv1.AnswerItem {
	var out []hitlv1.AnswerItem
	for _, q := range typedQuestions() {
		item := answerer.Skip(q.ID)
		for _, it := range items {
			if it.ID == q.ID {
				item = it
			}
		}
		out = append(out, item)
	}
	return out
}

func TestDescribeInput(t *testing.T) {
	g := NewWithT(t)
	qs := typedQuestions()
	g.Expect(answerer.DescribeInput(qs[0].Input)).To(Equal("an integer from 1 to 10"))
	g.Expect(answerer.DescribeInput(qs[1].Input)).To(Equal("a number of at most 0.5"))
	g.Expect(answerer.DescribeInput(qs[2].Input)).To(Equal("true or false"))
	g.Expect(answerer.DescribeInput(qs[3].Input)).To(Equal("a date YYYY-MM-DD"))
	g.Expect(answerer.DescribeInput(qs[5].Input)).To(Equal(`text of 20 to 40 characters matching pattern "^sk-"`))
	g.Expect(answerer.DescribeInput(&hitlv1.AnswerInput{Type: hitlv1.InputEmail, MaxLength: ptr.To[int32](60)})).
		To(Equal("an email address of at most 60 characters"))
	g.Expect(answerer.DescribeInput(nil)).To(Equal("text"))
}

// The typed items write what the question's rule takes, and the typed
// accessors read it back.
func TestTypedItems(t *testing.T) {
	g := NewWithT(t)
	day := time.Date(2026, 12, 24, 18, 30, 0, 0, time.FixedZone("CET", 3600))
	items := []hitlv1.AnswerItem{answerer.Int("replicas", 4), answerer.Float("ratio", 0.25), answerer.Bool("dry", true),
		answerer.Date("day", day), answerer.DateTime("at", day), answerer.Skip("token")}
	g.Expect(validation.ValidateAnswers(typedQuestions(), items)).To(Succeed())
	g.Expect(items[0].Int()).To(Equal(int64(4)))
	g.Expect(items[1].Float()).To(Equal(0.25))
	g.Expect(items[2].Bool()).To(BeTrue())
	g.Expect(items[3].Custom).To(Equal("2026-12-24"))
	at, err := items[4].Time()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at.Equal(day)).To(BeTrue(), "DateTime reads back as %v", at)
	g.Expect(answerer.Choose("env", "a", "b")).To(Equal(hitlv1.AnswerItem{ID: "env", Selected: []string{"a", "b"}}))

	// A value out of bounds is refused with the rule.
	err = validation.ValidateAnswers(typedQuestions(), []hitlv1.AnswerItem{answerer.Int("replicas", 12)})
	g.Expect(err).To(MatchError(ContainSubstring("12 is above maximum 10")))
}

// Seal checks and seals without ever showing the value.
func TestSeal(t *testing.T) {
	g := NewWithT(t)
	key, err := sealed.NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	q := &hitlv1.UserQuestion{Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: typedQuestions(), SealingKey: key.PublicKey()}}
	q.Namespace, q.Name, q.UID = "team-a", "deploy", "uid-1"
	const secret = "sk-0123456789abcdefghij"

	item, err := answerer.Seal(q, "token", secret)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(item.Custom).To(BeEmpty())
	g.Expect(item.Selected).To(BeEmpty())
	g.Expect(item.Sealed).NotTo(ContainSubstring("sk-0123"))
	g.Expect(key.Open(item.Sealed, sealed.Binding{Namespace: "team-a", Question: "deploy", UID: "uid-1", ID: "token"})).To(Equal(secret))

	for value, why := range map[string]string{
		"sk-short":                       "too short",
		"pk-0123456789abcdefghijklmnop":  "not matching the pattern",
		strings.Repeat("sk-x", 11) + "!": "too long",
	} {
		_, err := answerer.Seal(q, "token", value)
		g.Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeBadAnswer), why)
		g.Expect(err.Error()).To(ContainSubstring(`the answer is not text of 20 to 40 characters matching pattern "^sk-"`), why)
		g.Expect(err.Error()).NotTo(ContainSubstring(value[:6]), "%s: the error shows the value", why)
	}
	_, err = answerer.Seal(q, "replicas", "4")
	g.Expect(err).To(MatchError(ContainSubstring("question replicas: the question is not sensitive")))
	_, err = answerer.Seal(q, "nope", secret)
	g.Expect(err).To(MatchError(ContainSubstring("not a question of deploy")))
	_, err = answerer.Seal(q, "token", "")
	g.Expect(err).To(MatchError(ContainSubstring("an empty answer is a skip")))
}

var _ = Describe("A sensitive answer", func() {
	var (
		ns  string
		a   *answerer.Answerer
		bot *agent.Agent
	)
	const secret = "sk-live-4f9a1c2e7b3d5e6f"
	BeforeEach(func() {
		ns = newNamespace()
		a = answerer.New(watcher, ns, "inbox", "bot")
		bot = agent.New(watcher, ns, "bot")
	})

	askTyped := func(name string) *hitlv1.UserQuestion {
		GinkgoHelper()
		q, err := bot.Create(ctx, agent.Request{Name: name, Questions: typedQuestions()}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(q.Spec.SealingKey).NotTo(BeEmpty(), "the agent asks a sensitive question with its key")
		return q
	}

	It("is sealed by Create before it is sent: the reply holds only the sealed value, which the agent opens", func() {
		askTyped("q")
		answers := full(answerer.Int("replicas", 3), answerer.Sensitive("token", secret))
		out, err := a.Reply(ctx, "q", answers)
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied), out.Message)
		Expect(answers[5].Custom).To(Equal(secret), "the caller's batch is left as it was")

		rs := replies(ns)
		Expect(rs).To(HaveLen(1))
		var token hitlv1.AnswerItem
		for _, item := range rs[0].Spec.Answers {
			if item.ID == "token" {
				token = item
			}
		}
		Expect(token.Custom).To(BeEmpty())
		Expect(token.Selected).To(BeEmpty())
		Expect(token.Sealed).NotTo(BeEmpty())

		q := question(ns, "q")()
		Expect(q.Status.State).To(Equal(hitlv1.StateSettled))
		for _, item := range q.Status.Answers {
			Expect(item.Custom).NotTo(ContainSubstring("sk-live"), "the question's status holds the value")
		}
		k, err := bot.SealingKey()
		Expect(err).NotTo(HaveOccurred())
		Expect(k.Open(token.Sealed, sealed.Binding{Namespace: ns, Question: "q", UID: string(q.UID), ID: "token"})).To(Equal(secret))
		res, err := bot.ResultOf(q)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Sensitive).To(Equal(map[string]string{"token": secret}))
	})

	It("that breaks its input rule is refused with BAD_ANSWER, without the value, and creates nothing", func() {
		askTyped("q")
		_, err := a.Reply(ctx, "q", full(answerer.Int("replicas", 3), answerer.Sensitive("token", "pk-live-4f9a1c2e7b3d5e6f")))
		Expect(validation.CodeOf(err)).To(Equal(hitlv1.CodeBadAnswer))
		Expect(err.Error()).To(HavePrefix("BAD_ANSWER: question token: the answer is not text of 20 to 40 characters"))
		Expect(err.Error()).NotTo(ContainSubstring("pk-live"))
		Expect(replies(ns)).To(BeEmpty())
	})

	It("sealed with Seal for the question read is applied as it is", func() {
		q := askTyped("q")
		item, err := answerer.Seal(q, "token", secret)
		Expect(err).NotTo(HaveOccurred())
		out, err := a.Reply(ctx, "q", full(answerer.Int("replicas", 1), item))
		Expect(err).NotTo(HaveOccurred())
		Expect(out.Outcome).To(Equal(hitlv1.OutcomeApplied), out.Message)
		res, err := bot.ResultOf(question(ns, "q")())
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Sensitive["token"]).To(Equal(secret))
	})

	It("cannot skip a required question", func() {
		askTyped("q")
		_, err := a.Reply(ctx, "q", full(answerer.Sensitive("token", secret)))
		Expect(err).To(MatchError(ContainSubstring("question replicas: the question is required")))
		Expect(replies(ns)).To(BeEmpty())
	})
})
