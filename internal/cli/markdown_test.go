package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/builders"
)

// planReview is a PlanReview question whose plan has headings, a code
// block and a list of its own.
func planReview() *hitlv1.UserQuestion {
	q := at(builders.Question("migrate", "agents").Agent("db-bot").
		Ask("plan", "May I run this migration?", "Revise", "Run it").
		Detail("# Migration\n\n1. Stop the writers\n2. Run:\n\n```sql\nALTER TABLE users ADD COLUMN age int;\n```\n").
		PlanReview("Run it").Obj(), t0)
	q.Spec.Questions[0].Header = "Schema"
	q.Spec.AskedBy = &hitlv1.UserInfo{Username: "system:serviceaccount:agents:db-bot"}
	q.UID = "uid-migrate"
	q.Status = hitlv1.UserQuestionStatus{State: hitlv1.StateOpen, SpecDigest: "sha256:" + strings.Repeat("ef", 32)}
	return q
}

func TestShowMarkdown(t *testing.T) {
	for _, c := range []struct {
		golden string
		q      *hitlv1.UserQuestion
	}{
		{"markdown-timed-open.golden", boundOpen()},
		{"markdown-settled-late.golden", settledLate()},
		{"markdown-continued-queued.golden", continuedQueued()},
		{"markdown-governed-open.golden", governedOpen()},
		{"markdown-governed-settled.golden", governedSettled()},
		{"markdown-plan-review.golden", planReview()},
	} {
		t.Run(c.golden, func(t *testing.T) {
			out, errOut, err := runWith(t, []client.Object{c.q}, "show", c.q.Name, "-o", "markdown")
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			golden(t, c.golden, out)
		})
	}
}

// hostile is a question whose agent wrote, in every text it controls,
// markdown and HTML meant to break out of its place in the page.
func hostile() *hitlv1.UserQuestion {
	q := planReview()
	in := &q.Spec.Questions[0]
	in.Header = "<b>x</b>"
	in.Question = "Deploy?</details><script>alert(1)</script>\n# Owned\n\n| a | b |"
	in.Detail = "# Plan\n</details><script>alert(2)</script>\n````\n```\nstill code\n<img src=x onerror=alert(3)>\n"
	in.Options = []hitlv1.QuestionOption{
		{Label: "[click](javascript:alert(4))", Description: "<img src=x onerror=alert(5)> ![i](http://x/i.png)"},
		{Label: "Run it", Description: "\n- item\n> quote\n```\n<https://evil.example>"},
	}
	q.Spec.AskedBy.Username = "eve</code><script>"
	q.Status.State = hitlv1.StateSettled
	q.Status.Answers = []hitlv1.AnswerItem{{ID: "plan", Selected: []string{"Run it"}, Custom: "`x` <!-- & &amp; \\"}}
	q.Status.Settlement = &hitlv1.Settlement{Reply: "r", At: metav1.NewMicroTime(t0), AnsweredBy: &hitlv1.UserInfo{Username: "1. <i>mallory</i>"}}
	return q
}

func TestShowMarkdownKeepsTheAgentsTextInItsPlace(t *testing.T) {
	q := hostile()
	out, errOut, err := runWith(t, []client.Object{q}, "show", q.Name, "-o", "markdown")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	// Render it as a permissive renderer would (GitHub's markdown, raw
	// HTML let through before any sanitizing): only the page's own
	// structure may come out.
	source := []byte(out)
	md := goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(html.WithUnsafe()))
	doc := md.Parser().Parse(text.NewReader(source))

	var headings, rawHTML, fences []string
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Heading:
			headings = append(headings, strings.Repeat("#", n.Level)+" "+plain(n, source))
		case *ast.HTMLBlock:
			rawHTML = append(rawHTML, strings.TrimSpace(blockSource(n, source)))
		case *ast.RawHTML:
			rawHTML = append(rawHTML, string(n.Segments.Value(source)))
		case *ast.FencedCodeBlock:
			fences = append(fences, blockSource(n, source))
		case *ast.Link, *ast.AutoLink, *ast.Image, *extast.Table, *extast.Strikethrough, *ast.Blockquote:
			t.Errorf("a %s came out of the agent's text", n.Kind())
		}
		return ast.WalkContinue, nil
	})

	wantHeadings := []string{
		"## <b>x</b>: Question agents/migrate from agent db-bot",
		"### 1. <b>x</b>: Deploy?</details><script>alert(1)</script> # Owned | a | b |",
		"### Answers",
	}
	if strings.Join(headings, "\n") != strings.Join(wantHeadings, "\n") {
		t.Errorf("headings:\n%s\nwant:\n%s", strings.Join(headings, "\n"), strings.Join(wantHeadings, "\n"))
	}
	if want := []string{"<details open><summary>Plan</summary>", "</details>"}; strings.Join(rawHTML, "\n") != strings.Join(want, "\n") {
		t.Errorf("raw HTML %q, want the detail's <details> element alone", rawHTML)
	}
	if len(fences) != 1 || fences[0] != q.Spec.Questions[0].Detail {
		t.Errorf("the detail is not shown as written, in one code block: %q", fences)
	}

	var page bytes.Buffer
	if err := md.Renderer().Render(&page, source, doc); err != nil {
		t.Fatal(err)
	}
	for _, tag := range []string{"<script", "<img", "<a ", "<b>", "<i>", "<h1", "<table", "<blockquote", "<!--"} {
		if strings.Contains(page.String(), tag) {
			t.Errorf("the page holds %s:\n%s", tag, page.String())
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "[click](javascript:alert(4))", "eve&lt;/code&gt;&lt;script&gt;",
		"1. &lt;i&gt;mallory&lt;/i&gt;", "`x` &lt;!-- &amp; &amp;amp;"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page does not show %q as text:\n%s", want, page.String())
		}
	}
}

// plain is the text a node renders, its escapes resolved.
func plain(n ast.Node, source []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := c.(*ast.Text); ok && entering {
			b.Write(util.UnescapePunctuations(t.Value(source)))
			if t.SoftLineBreak() {
				b.WriteByte(' ')
			}
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// blockSource is the source of a block node's lines.
func blockSource(n ast.Node, source []byte) string {
	var b strings.Builder
	for i := 0; i < n.Lines().Len(); i++ {
		seg := n.Lines().At(i)
		b.Write(seg.Value(source))
	}
	return b.String()
}

func TestMarkdownIsAnOutputOfShowOnly(t *testing.T) {
	completions := func(args ...string) []string {
		t.Helper()
		out, _, err := runWith(t, fixtures(), append([]string{"__complete"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(out, "\n")
	}
	if got := completions("show", "deploy", "-o", ""); !slices.Contains(got, "markdown") || !slices.Contains(got, "jsonpath") {
		t.Errorf("-o of show completes to %q", got)
	}
	if got := completions("list", "-o", ""); slices.Contains(got, "markdown") || !slices.Contains(got, "wide") {
		t.Errorf("-o of list completes to %q", got)
	}
	if out, _, _ := runWith(t, fixtures(), "show", "--help"); !strings.Contains(out, "markdown") {
		t.Errorf("show --help does not list markdown:\n%s", out)
	}
	for _, args := range [][]string{{"list", "-o", "markdown"}, {"answer", "deploy", "--select", "env=prod", "--name", "r", "--dry-run=client", "-o", "markdown"}} {
		if _, _, err := runWith(t, fixtures(), args...); err == nil || !strings.Contains(err.Error(), `output format "markdown"`) {
			t.Errorf("%v: got %v, want markdown refused", args, err)
		}
	}
}

func TestMarkdownEscaping(t *testing.T) {
	for in, want := range map[string]string{
		"plain words":           "plain words",
		" \n\t":                 `\-`,
		"a\nb\r\nc\u2028d":      "a b c d",
		"<b>&amp;</b>":          `\<b\>\&amp;\</b\>`,
		"# h\n1. x\n- y":        `\# h 1\. x \- y`,
		"`code` *e* _e_ ~s~ $m": "\\`code\\` \\*e\\* \\_e\\_ \\~s\\~ \\$m",
		`[a](b) ![c](d) | \`:    `\[a\]\(b\) \!\[c\]\(d\) \| \\`,
	} {
		if got := mdText(in); got != want {
			t.Errorf("mdText(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"sha256:ab": "`sha256:ab`",
		"a`b":       "``a`b``",
		"`a``":      "``` `a`` ```",
		"":          `\-`,
	} {
		if got := mdCode(in); got != want {
			t.Errorf("mdCode(%q) = %q, want %q", in, got, want)
		}
	}
	var b bytes.Buffer
	mdFence(&b, "markdown", "```\n`````x\n")
	if want := "``````markdown\n```\n`````x\n``````\n"; b.String() != want {
		t.Errorf("mdFence = %q, want %q", b.String(), want)
	}
}
