package inbox

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
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
		{"![ref pixel][p]\n\n[p]: https://tracker.example/r.png", `<a href="https://tracker.example/r.png" rel="noopener noreferrer nofollow" target="_blank">ref pixel</a>`},
		{`[![badge](https://tracker.example/b.png)](https://example.com)`, `badge</a>`},
		{"| a |\n| - |\n| ![cell](https://tracker.example/c.png) |", `>cell</a>`},
		{`![inline](data:image/png;base64,iVBORw0KGgo=)`, `<p>inline</p>`},
		{`![svg](data:image/svg+xml;base64,PHN2Zz4=)`, `<p>svg</p>`},
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

// TestNoImagesIsABackstop renders an image that no transformer turned
// into a link: it is its text, never <img>.
func TestNoImagesIsABackstop(t *testing.T) {
	bare := goldmark.New(goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(noImages{}, 100))))
	var buf bytes.Buffer
	if err := bare.Convert([]byte(`a ![pixel **here**](https://tracker.example/p.png) b`), &buf); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "<p>a pixel <strong>here</strong> b</p>\n"; got != want {
		t.Errorf("an image renders as %q, want %q", got, want)
	}
}

func TestIconsOnlyFromInlineRasterImages(t *testing.T) {
	g := NewWithT(t)
	encoded := func(enc func(io.Writer, image.Image) error) string {
		var buf bytes.Buffer
		g.Expect(enc(&buf, image.NewGray(image.Rect(0, 0, 2, 2)))).To(Succeed())
		return base64.StdEncoding.EncodeToString(buf.Bytes())
	}
	pngData := encoded(png.Encode)
	gifData := encoded(func(w io.Writer, m image.Image) error { return gif.Encode(w, m, nil) })
	jpegData := encoded(func(w io.Writer, m image.Image) error { return jpeg.Encode(w, m, nil) })
	webpData := base64.StdEncoding.EncodeToString([]byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00"))
	svgData := base64.StdEncoding.EncodeToString([]byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`))
	for _, c := range []struct {
		name, icon string
		shown      bool
	}{
		{"a png", "data:image/png;base64," + pngData, true},
		{"a gif", "data:image/gif;base64," + gifData, true},
		{"a jpeg", "data:image/jpeg;base64," + jpegData, true},
		{"a webp", "data:image/webp;base64," + webpData, true},
		{"an https URL (a tracking pixel)", "https://tracker.example/p.png", false},
		{"an http URL", "http://tracker.example/p.png", false},
		{"a protocol-relative URL", "//tracker.example/p.png", false},
		{"a relative URL", "/static/logo.png", false},
		{"an svg", "data:image/svg+xml;base64," + svgData, false},
		{"an svg named png", "data:image/png;base64," + svgData, false},
		{"a gif named png", "data:image/png;base64," + gifData, false},
		{"a png not in base64", "data:image/png,%89PNG%0D%0A%1A%0A", false},
		{"broken base64", "data:image/png;base64," + pngData[:len(pngData)-3] + "!", false},
		{"a parameter before base64", "data:image/png;charset=x;base64," + pngData, false},
		{"an html document", "data:text/html;base64," + base64.StdEncoding.EncodeToString([]byte("<script>alert(1)</script>")), false},
		{"javascript", "javascript:alert(1)", false},
		{"nothing", "", false},
	} {
		got := string(iconURL(c.icon))
		if c.shown {
			g.Expect(got).To(Equal(c.icon), c.name)
		} else {
			g.Expect(got).To(BeEmpty(), c.name)
		}
	}

	s, err := New(Options{Auth: &ProxyAuth{Secret: []byte("0123456789abcdef")}, Clients: StaticClient(nil)})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	card := func(icon string) string {
		return s.item(approval(icon), Person{Username: "alice"}, nil, time.Now()).Card
	}
	g.Expect(card("data:image/png;base64,"+pngData)).To(ContainSubstring(`<img src="data:image/png;base64,`+pngData+`"`),
		"html/template keeps the checked data: URI")
	g.Expect(card("https://tracker.example/p.png")).NotTo(ContainSubstring("<img"))
	g.Expect(card("https://tracker.example/p.png")).NotTo(ContainSubstring("tracker.example"))
	g.Expect(card("data:image/svg+xml;base64," + svgData)).NotTo(ContainSubstring("<img"))
}

// approval is an open Approval question whose subject has icon.
func approval(icon string) *hitlv1.UserQuestion {
	return &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "ns", CreationTimestamp: metav1.Now()},
		Spec: hitlv1.UserQuestionSpec{Agent: "bot", Questions: []hitlv1.Question{{
			ID: "allow", Question: "Run the migration?",
			Options: []hitlv1.QuestionOption{{Label: "Allow"}, {Label: "Deny"}},
			Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: &hitlv1.ApprovalIntent{
				Approve: "Allow", Reject: "Deny", Subject: &hitlv1.ApprovalSubject{Name: "migrator", Icon: icon},
			}},
		}}},
		Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen},
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
		Status: hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, Claims: []hitlv1.ClaimHolder{{Name: "l", Holder: evil}},
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
	g.Expect(it.Card).NotTo(ContainSubstring("<img"), "an icon that is not an inline raster image is not shown")
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

func TestCardsSayWhenAnAnswerCameThroughGit(t *testing.T) {
	g := NewWithT(t)
	s, err := New(Options{Auth: &ProxyAuth{Secret: []byte("0123456789abcdef")}, Clients: StaticClient(nil)})
	g.Expect(err).NotTo(HaveOccurred())
	defer s.Close()
	src := &hitlv1.ReplySource{Engine: hitlv1.EngineReference{Kind: "Kustomization", Namespace: "team-a", Name: "answers"},
		Revision: "main@sha1:9b1d6c0e4f3a2d8c7b6a5e4f3d2c1b0a9e8d7c6b", Verified: true}
	q := &hitlv1.UserQuestion{
		ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: "team-a", CreationTimestamp: metav1.Now()},
		Spec:       hitlv1.UserQuestionSpec{Agent: "bot", Questions: []hitlv1.Question{{ID: "env", Question: "Where?", Options: []hitlv1.QuestionOption{{Label: "prod"}}}}},
		Status: hitlv1.UserQuestionStatus{State: hitlv1.StateSettled, Answers: []hitlv1.AnswerItem{{ID: "env", Selected: []string{"prod"}}},
			Settlement: &hitlv1.Settlement{Reply: "q-3f9c", AnsweredBy: &hitlv1.UserInfo{Username: "system:serviceaccount:team-a:answers"}, Source: src}},
	}
	it := s.item(q, Person{Username: "alice"}, nil, time.Now())
	g.Expect(it.Status + it.Card).To(ContainSubstring("via Git, commit 9b1d6c0 (verified), applied by Kustomization team-a/answers"))

	q.Status.Settlement.Source = nil
	it = s.item(q, Person{Username: "alice"}, nil, time.Now())
	g.Expect(it.Status+it.Card).NotTo(ContainSubstring("via Git"), "a reply sent otherwise says nothing of Git")
}
