package inbox

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

// typed is an open ask of one question with input, and an Other field's
// question of options with the same input.
func typed(in *hitlv1.AnswerInput) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", CreationTimestamp: metav1.Now()},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: []hitlv1.Question{
			{ID: "v", Question: "Value?", Input: in},
			{ID: "o", Question: "Pick or type?", Options: []hitlv1.QuestionOption{{Label: "a", Value: "A"}}, Input: in},
		}},
		Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen},
	}
}

func TestCardsRenderTheControlOfTheInput(t *testing.T) {
	g := NewWithT(t)
	s, err := New(Options{Auth: &ProxyAuth{Secret: []byte("0123456789abcdef")}, Clients: StaticClient(nil)})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	card := func(in *hitlv1.AnswerInput) string {
		return s.item(typed(in), Person{Username: "alice"}, nil, time.Now()).Card
	}
	num := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	str := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }

	c := card(&hitlv1.AnswerInput{Type: hitlv1.InputInteger, Minimum: str("0.5"), Maximum: num(10), Required: true})
	g.Expect(c).To(ContainSubstring(`<input data-custom type="number" id="`))
	g.Expect(c).To(ContainSubstring(`min="1" max="10" step="1" aria-describedby=`), "an integer's bounds are whole numbers")
	g.Expect(c).To(ContainSubstring(`Required. A whole number from 0.5 to 10.`))
	g.Expect(c).To(ContainSubstring(`aria-required="true"`))
	g.Expect(c).NotTo(ContainSubstring(`data-skip`), "a required question has no skip")

	c = card(&hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: str("-1.5")})
	g.Expect(c).To(ContainSubstring(`min="-1.5" step="any"`))
	g.Expect(c).To(ContainSubstring(`A number of at least -1.5.`))
	g.Expect(c).To(ContainSubstring(`data-skip`), "a question of several that is not required may be skipped")

	g.Expect(card(&hitlv1.AnswerInput{Type: hitlv1.InputDate})).To(ContainSubstring(`type="date"`))
	g.Expect(card(&hitlv1.AnswerInput{Type: hitlv1.InputDateTime})).To(ContainSubstring(`type="datetime-local"`))
	g.Expect(card(&hitlv1.AnswerInput{Type: hitlv1.InputEmail})).To(ContainSubstring(`type="email"`))
	g.Expect(card(&hitlv1.AnswerInput{Type: hitlv1.InputURI})).To(ContainSubstring(`type="url"`))

	c = card(&hitlv1.AnswerInput{Type: hitlv1.InputBoolean, Required: true})
	g.Expect(c).To(ContainSubstring(`value="true" data-bool>`))
	g.Expect(c).To(ContainSubstring(`value="false" data-bool>`), "a required boolean may be answered false")
	g.Expect(c).To(ContainSubstring(`<select data-custom`), "beside options, a boolean Other is a choice of true or false")

	c = card(&hitlv1.AnswerInput{Type: hitlv1.InputString, MinLength: ptr.To[int32](3), MaxLength: ptr.To[int32](20), Pattern: `^T-[0-9]{2,5}$`})
	g.Expect(c).To(ContainSubstring(`<textarea data-custom`))
	g.Expect(c).To(ContainSubstring(`Text, 3 to 20 characters, matching the pattern ^T-[0-9]{2,5}$.`))
	g.Expect(c).NotTo(ContainSubstring(`maxlength`), "the page checks lengths as the rule counts them")
	g.Expect(c).NotTo(ContainSubstring(`pattern=`), "and patterns unanchored")
	g.Expect(c).To(ContainSubstring(`&#34;pattern&#34;:&#34;^T-[0-9]{2,5}$&#34;`), "the page's checker has the rule")
}

func TestASensitiveQuestionIsAPasswordAndItsAnswerIsNeverShown(t *testing.T) {
	g := NewWithT(t)
	s, err := New(Options{Auth: &ProxyAuth{Secret: []byte("0123456789abcdef")}, Clients: StaticClient(nil)})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	const key = "BJ7iBl0bLxk2sSLPl0pB6VHU8b2xXvAX5WSeh6RkKYk0k3Q4LoJqnR6sC0Z5GvnNqYwH1bNmWMbO5rXcS7LNbWc"
	const sealedText = "AQSealedCiphertextThatNobodyButTheAgentReads"
	q := &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", CreationTimestamp: metav1.Now()},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", SealingKey: key, Questions: []hitlv1.Question{
			{ID: "token", Question: "API token?", Sensitive: true, Input: &hitlv1.AnswerInput{Type: hitlv1.InputString, Required: true}},
		}},
		Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen},
	}
	it := s.item(q, Person{Username: "alice"}, nil, time.Now())
	g.Expect(it.Card).To(ContainSubstring(`<input data-custom type="password" id="`))
	g.Expect(it.Card).To(ContainSubstring(`autocomplete="off"`))
	g.Expect(it.Card).To(ContainSubstring(`data-sealing-key="` + key + `"`))
	g.Expect(it.Card).To(ContainSubstring(` data-sensitive>`))
	g.Expect(it.Card).To(ContainSubstring(`Required. Sensitive: your browser seals the answer`))

	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateSettled, Answers: []hitlv1.AnswerItem{{ID: "token", Sealed: sealedText}},
		Settlement: &hitlv1.Settlement{Reply: "q-1", AnsweredBy: &hitlv1.UserInfo{Username: "alice"}}}
	it = s.item(q, Person{Username: "alice"}, nil, time.Now())
	g.Expect(it.Status).To(ContainSubstring("token: sensitive answer given"))
	g.Expect(it.Status + it.Card).NotTo(ContainSubstring(sealedText))

	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateContinued, QueuedReply: &hitlv1.QueuedReply{Name: "q-2",
		Answers: []hitlv1.AnswerItem{{ID: "token", Sealed: sealedText}}}}
	it = s.item(q, Person{Username: "alice"}, nil, time.Now())
	g.Expect(it.Status).To(ContainSubstring("(token: sensitive answer given)"))
	g.Expect(it.Status + it.Card).NotTo(ContainSubstring(sealedText))
}
