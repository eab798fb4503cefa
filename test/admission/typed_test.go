package admission_test

import (
	"fmt"
	"math/rand/v2"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/sealed"
	"github.com/hitl-dev/hitl/test/oracle"
	"github.com/hitl-dev/hitl/test/testenv"
)

// typedCases: typed and sensitive answers (SPEC §8), checked at admission
// by the webhook where it runs and by the controller in every mode.
var typedCases = []admissionCase{
	{name: "each input type refuses fuzzed values the oracle refuses, with BAD_ANSWER naming the question, and stores one that fits as given", run: func(s *scene) {
		bot, alice := askerAndAnswerer(s)

		seed := GinkgoRandomSeed()
		r := rand.New(rand.NewPCG(uint64(seed), uint64(len(s.mode.String()))))
		for i, t := range oracle.Seeds {
			id := fmt.Sprintf("%s-%d", strings.ToLower(string(t.In.Type)), i)
			q := s.question("release-bot")
			q.Spec.Questions = []hitlv1.Question{{ID: id, Question: "Which value?", Input: t.In}}
			Expect(bot.Create(ctx, q)).To(Succeed())
			bad, good := oracle.Mutations(r, t.In, t.Value, 3)
			Expect(bad).To(HaveLen(3), "the fuzzer found bad values for %s (seed %d)", t.In.Type, seed)
			for _, v := range bad {
				reply := typedReply(s, q, hitlv1.AnswerItem{ID: id, Custom: v})
				err := alice.Create(ctx, reply)
				if feedback(s) {
					refusedByWebhook(err, hitlv1.CodeBadAnswer, "question "+id+": ", "(spec.answers[0].custom)")
					continue
				}
				Expect(err).NotTo(HaveOccurred(), "%s %q: the policies cannot read the question; the controller refuses it", t.In.Type, v)
				s.expectRejected(reply.Name, hitlv1.CodeBadAnswer, "question "+id+": ")
			}
			s.staysOpen(q.Name)
			Expect(alice.Create(ctx, typedReply(s, q, hitlv1.AnswerItem{ID: id, Custom: good}))).To(Succeed(), "%s %q", t.In.Type, good)
			Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
			Expect(s.storedQuestion(q.Name).Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: id, Custom: good}}))
		}
	}},

	{name: "a required question may not be skipped", run: func(s *scene) {
		bot, alice := askerAndAnswerer(s)

		q := s.question("release-bot")
		q.Spec.Questions = append(q.Spec.Questions, hitlv1.Question{ID: "replicas", Question: "How many?",
			Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger, Required: true}})
		Expect(bot.Create(ctx, q)).To(Succeed())
		skip := typedReply(s, q, hitlv1.AnswerItem{ID: "env", Selected: []string{"staging"}}, hitlv1.AnswerItem{ID: "replicas"})
		err := alice.Create(ctx, skip)
		if feedback(s) {
			refusedByWebhook(err, hitlv1.CodeBadAnswer, "question replicas: the question is required")
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectRejected(skip.Name, hitlv1.CodeBadAnswer, "question replicas: the question is required")
		}
		Expect(alice.Create(ctx, typedReply(s, q, hitlv1.AnswerItem{ID: "env", Selected: []string{"staging"}}, hitlv1.AnswerItem{ID: "replicas", Custom: "3"}))).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
	}},

	{name: "a sensitive answer is refused in the clear and settles sealed: only the asking agent's key opens it", run: func(s *scene) {
		bot, alice := askerAndAnswerer(s)
		key, err := sealed.NewKey()
		Expect(err).NotTo(HaveOccurred())

		q := s.question("release-bot")
		q.Spec.Questions = []hitlv1.Question{{ID: "token", Question: "The deploy token?", Sensitive: true}}
		noKey := q.DeepCopy()
		refusedByCRD(bot.Create(ctx, noKey), hitlv1.CodeBadInput, "spec.sealingKey")
		q.Spec.SealingKey = key.PublicKey()
		Expect(bot.Create(ctx, q)).To(Succeed())

		plain := typedReply(s, q, hitlv1.AnswerItem{ID: "token", Custom: "hunter2-plain"})
		err = alice.Create(ctx, plain)
		if feedback(s) {
			refusedByWebhook(err, hitlv1.CodeBadAnswer, "question token: the question is sensitive")
		} else {
			Expect(err).NotTo(HaveOccurred())
			s.expectRejected(plain.Name, hitlv1.CodeBadAnswer, "question token: the question is sensitive")
		}
		mixed := typedReply(s, q, hitlv1.AnswerItem{ID: "token", Custom: "x", Sealed: "eHg"})
		refusedByCRD(alice.Create(ctx, mixed), hitlv1.CodeBadAnswer, "a sealed answer takes no selected and no custom")

		box, err := sealed.Seal(q.Spec.SealingKey, sealed.Binding{Namespace: q.Namespace, Question: q.Name, UID: string(q.UID), ID: "token"}, "hunter2-sealed")
		Expect(err).NotTo(HaveOccurred())
		Expect(alice.Create(ctx, typedReply(s, q, hitlv1.AnswerItem{ID: "token", Sealed: box}))).To(Succeed())
		Eventually(s.state(q.Name)).Should(Equal(hitlv1.StateSettled))
		stored := s.storedQuestion(q.Name)
		Expect(stored.Status.Answers).To(Equal([]hitlv1.AnswerItem{{ID: "token", Sealed: box}}))
		v, err := key.Open(stored.Status.Answers[0].Sealed, sealed.Binding{Namespace: q.Namespace, Question: q.Name, UID: string(q.UID), ID: "token"})
		Expect(err).NotTo(HaveOccurred())
		Expect(v).To(Equal("hunter2-sealed"))
	}},

	{name: "a question whose input rule is broken is refused BAD_INPUT by the CRD", run: func(s *scene) {
		bot := s.serviceAccount(s.ns, "release-bot", nil)
		s.bind(agentRole, serviceAccountSubject(s.ns, "release-bot"))
		s.awaitAllowed(bot, mayAsk)
		for field, broken := range map[string]hitlv1.Question{
			"minimum and maximum apply to a number or integer input":        {Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Minimum: ptr.To(intstr.FromInt32(1))}},
			"minLength and maxLength apply to a string, email or uri input": {Input: &hitlv1.AnswerInput{Type: hitlv1.InputDate, MaxLength: ptr.To[int32](3)}},
			"pattern applies to a string input":                             {Input: &hitlv1.AnswerInput{Type: hitlv1.InputEmail, Pattern: "x"}},
			"minLength is above maxLength":                                  {Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, MinLength: ptr.To[int32](5), MaxLength: ptr.To[int32](3)}},
			"minimum must be a number":                                      {Input: &hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("ten"))}},
			"a sensitive question takes free text only":                     {Sensitive: true, Options: []hitlv1.QuestionOption{{Label: "a"}}},
		} {
			q := s.question("release-bot")
			broken.ID, broken.Question = "q", "?"
			q.Spec.Questions = []hitlv1.Question{broken}
			q.Spec.SealingKey = "BA" + strings.Repeat("A", 85)
			refusedByCRD(bot.Create(ctx, q), hitlv1.CodeBadInput, field)
		}
		q := s.question("release-bot")
		q.Spec.Questions = []hitlv1.Question{{ID: "q", Question: "?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Pattern: "(unclosed"}}}
		Expect(bot.Create(ctx, q)).NotTo(Succeed(), "a pattern that is no regular expression is refused")
	}},
}

// askerAndAnswerer are the agent release-bot's ServiceAccount and alice,
// who may answer it, with the roles hitl ships.
func askerAndAnswerer(s *scene) (bot, alice client.Client) {
	GinkgoHelper()
	bot = s.serviceAccount(s.ns, "release-bot", nil)
	s.bind(agentRole, serviceAccountSubject(s.ns, "release-bot"))
	alice = s.user("alice", "answerers")
	s.bind(answererRole, userSubject("alice"))
	s.awaitAllowed(bot, mayAsk)
	s.awaitAllowed(alice, mayReply, mayAnswerAs("release-bot"))
	return bot, alice
}

// typedReply is a reply to q with the items given.
func typedReply(s *scene, q *hitlv1.UserQuestion, items ...hitlv1.AnswerItem) *hitlv1.QuestionReply {
	r := s.reply(q)
	r.Spec.Answers = items
	return labelled(r, q.Spec.Agent)
}

// refusedByCRD checks that err is an Invalid refusal by a CRD rule whose
// message starts with code and carries fragment.
func refusedByCRD(err error, code hitlv1.ErrorCode, fragment string) {
	GinkgoHelper()
	st := statusOf(err)
	Expect(st.Reason).To(Equal(metav1.StatusReasonInvalid), st.Message)
	Expect(st.Message).To(ContainSubstring(string(code) + ": "))
	Expect(st.Message).To(ContainSubstring(fragment))
}

// The typed answer cases, run in a cluster of each mode.
var _ = Describe("Typed and sensitive answers", func() {
	for _, mode := range modes {
		Describe("in "+mode.String()+" mode", func() {
			DescribeTable("typed answer cases", func(c admissionCase) {
				c.run(clusters[mode].newScene())
			}, entriesIn(mode, typedCases))
		})
	}
})

func entriesIn(mode testenv.Admission, cases []admissionCase) []TableEntry {
	var entries []TableEntry
	for _, c := range cases {
		if c.in(mode) {
			entries = append(entries, Entry(c.name, c))
		}
	}
	return entries
}
