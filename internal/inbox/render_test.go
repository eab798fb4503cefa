package inbox

import (
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
)

func TestMarkdownIsSafe(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`<script>alert(1)</script>`, `&lt;script&gt;alert(1)&lt;/script&gt;`},
		{`a <img src=x onerror=alert(1)> b`, `a &lt;img src=x onerror=alert(1)&gt; b`},
		{`[x](javascript:alert(1))`, `<p>x</p>`},
		{`[x](JaVaScRiPt:alert(1))`, `<p>x</p>`},
		{`[x](data:text/html,<script>alert(1)</script>)`, `<p>x</p>`},
		{`[x](/api/withdraw)`, `<p>x</p>`},
		{`<javascript:alert(1)>`, `<p>javascript:alert(1)</p>`},
		{`![pixel](https://tracker.example/p.png)`, `<a href="https://tracker.example/p.png" rel="noopener noreferrer nofollow" target="_blank">pixel</a>`},
		{`[docs](https://example.com/a?b=1&c=2)`, `<a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer nofollow" target="_blank">docs</a>`},
		{"**bold** and `code`", `<strong>bold</strong> and <code>code</code>`},
	} {
		got := string(renderMarkdown(c.src))
		if !strings.Contains(got, c.want) {
			t.Errorf("renderMarkdown(%q) = %q, want it to contain %q", c.src, got, c.want)
		}
		for _, bad := range []string{"<script", "<img", "javascript:alert(1)\"", "href=\"javascript", "href=\"data:", "onerror=alert(1)>"} {
			if strings.Contains(got, bad) {
				t.Errorf("renderMarkdown(%q) = %q contains %q", c.src, got, bad)
			}
		}
	}
}

func TestCardsEscapeAgentText(t *testing.T) {
	g := NewWithT(t)
	s, err := New(Options{Auth: &ProxyAuth{Secret: []byte("0123456789abcdef")}, Clients: StaticClient(nil)})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	evil := `"><script>alert(1)</script>`
	q := &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", CreationTimestamp: metav1.Now()},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: []hitlv1.Question{{
			ID: evil, Question: evil, Header: evil, Detail: evil,
			Options: []hitlv1.QuestionOption{{Label: evil, Description: evil}, {Label: "b"}, {Label: "c"}},
			Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: &hitlv1.ApprovalIntent{
				Approve: evil, Reject: "b", Always: "c",
				Subject: &hitlv1.ApprovalSubject{Name: evil, Icon: "javascript:alert(1)"},
				Display: &hitlv1.ApprovalDisplay{Question: hitlv1.LocalizedText{"en": evil}, Approve: hitlv1.LocalizedText{"en": evil}},
			}},
		}}},
		Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Claims: []hitlv1.ClaimHolder{{Lease: "l", Holder: evil}},
			QueuedReply: &hitlv1.QueuedReply{Name: evil, AnsweredBy: &hitlv1.UserInfo{Username: evil},
				Answers: []hitlv1.AnswerItem{{ID: evil, Custom: evil}}}},
	}
	it := s.item(q, Person{Username: evil}, nil, time.Now())
	g.Expect(it.Card).NotTo(BeEmpty())
	for _, html := range []string{it.Card, it.Status} {
		g.Expect(html).NotTo(ContainSubstring("<script"))
		g.Expect(html).NotTo(ContainSubstring(evil))
		g.Expect(html).NotTo(ContainSubstring("javascript:"))
		g.Expect(html).To(ContainSubstring("&lt;script&gt;"))
	}
	g.Expect(it.Card).NotTo(ContainSubstring("<img"), "an icon that is not https is not shown")
	g.Expect(it.Status).To(ContainSubstring(`data-action="withdraw"`), "the person's own queued reply can be withdrawn")
}

func TestLocales(t *testing.T) {
	g := NewWithT(t)
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Accept-Language", "fr;q=0.5, de-CH, en;q=0.1, *")
	g.Expect(locales(r)).To(Equal([]string{"de-CH", "fr", "en"}))
	text := hitlv1.LocalizedText{"en": "Allow?", "de": "Erlauben?"}
	g.Expect(localized(text, locales(r))).To(Equal("Erlauben?"), "de-CH falls back to de")
	g.Expect(localized(text, []string{"ja"})).To(Equal("Allow?"), "en when no locale matches")
}
