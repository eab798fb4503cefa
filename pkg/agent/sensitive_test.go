package agent_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

var _ = Describe("Sensitive questions", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	token := []hitlv1.Question{{ID: "token", Question: "The deploy token?", Sensitive: true},
		{ID: "replicas", Question: "How many?", Input: &hitlv1.AnswerInput{Type: hitlv1.InputInteger}}}

	// sealedReply answers q's token with value sealed to its key, and
	// replicas with 3.
	sealedReply := func(q *hitlv1.UserQuestion, name, value string) {
		GinkgoHelper()
		box, err := sealed.Seal(q.Spec.SealingKey, sealed.Binding{Namespace: ns, Question: q.Name, UID: string(q.UID), ID: "token"}, value)
		Expect(err).NotTo(HaveOccurred())
		Expect(admin.Create(ctx, &hitlv1.QuestionReply{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: hitlv1.QuestionReplySpec{QuestionRef: hitlv1.QuestionReference{Name: q.Name},
				Answers: []hitlv1.AnswerItem{{ID: "token", Sealed: box}, {ID: "replicas", Custom: "3"}}},
		})).To(Succeed())
	}
	stored := func(name string) *hitlv1.UserQuestion {
		GinkgoHelper()
		q := &hitlv1.UserQuestion{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, q)).To(Succeed())
		return q
	}

	It("asks with the Agent's key and opens the answer into Result.Sensitive; the answers keep only the sealed text", func() {
		bot := agent.New(admin, ns, "bot")
		done := async(func() (agent.Result, error) { return bot.Ask(ctx, agent.Request{Name: "deploy", Questions: token}) })
		Eventually(exists(ns, "deploy")).Should(Succeed())
		q := stored("deploy")
		key, err := bot.SealingKey()
		Expect(err).NotTo(HaveOccurred())
		Expect(q.Spec.SealingKey).To(Equal(key.PublicKey()))
		sealedReply(q, "r", "s3cret")

		var got asked
		Eventually(done).Should(Receive(&got))
		Expect(got.err).NotTo(HaveOccurred())
		Expect(got.res.Sensitive).To(Equal(map[string]string{"token": "s3cret"}))
		Expect(got.res.Answers[0].Custom).To(BeEmpty())
		Expect(got.res.Answers[0].Sealed).NotTo(BeEmpty())
		Expect(got.res.Answers[1].Int()).To(Equal(int64(3)))
	})

	It("opens a late answer after a restart only with the key it kept", func() {
		first := agent.New(admin, ns, "bot")
		res, err := first.AskTimed(ctx, agent.Request{Name: "later", Questions: token}, 500*time.Millisecond)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Pending).To(BeTrue())
		kept, err := first.SealingKey()
		Expect(err).NotTo(HaveOccurred())
		sealedReply(stored("later"), "late", "late-s3cret")
		Eventually(func() *hitlv1.QueuedReply { return stored("later").Status.QueuedReply }).ShouldNot(BeNil())

		forgetful := agent.New(admin, ns, "bot")
		_, err = forgetful.Admit(ctx, "later", "late")
		Expect(err).To(MatchError(ContainSubstring("the sensitive answer to token")), "a new key does not open it")
		Expect(err).NotTo(MatchError(ContainSubstring("late-s3cret")))

		restarted := agent.New(admin, ns, "bot")
		parsed, err := sealed.ParseKey(kept.Bytes())
		Expect(err).NotTo(HaveOccurred())
		restarted.UseSealingKey(parsed)
		settled, err := restarted.ResultOf(stored("later"))
		Expect(err).NotTo(HaveOccurred())
		Expect(settled.Sensitive).To(Equal(map[string]string{"token": "late-s3cret"}))
	})

	It("refuses a sensitive ask without a key at the API server with BAD_INPUT", func() {
		q := &hitlv1.UserQuestion{ObjectMeta: metav1.ObjectMeta{Name: "nokey", Namespace: ns},
			Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: token}}
		err := admin.Create(ctx, q)
		Expect(err).To(MatchError(ContainSubstring("BAD_INPUT: a sensitive question needs spec.sealingKey")))
	})
})
