package inbox

import (
	"bytes"
	"html/template"
	"net/url"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// md renders an agent's markdown (a question's detail, a plan) to HTML that
// is safe to put in the page: raw HTML in the source is shown as text
// (rawAsText; goldmark without WithUnsafe would drop it), links keep only the schemes of safeSchemes and open
// in a new tab without a referrer, and images become links (and any image
// left is rendered as its text: noImages), so that an agent's text can
// neither run script nor make the browser load anything.
var md = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.TaskList),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(linkPolicy{}, 100))),
	// A lower value than the HTML renderer's 1000 registers later, so that
	// it replaces that renderer's functions for raw HTML and images.
	goldmark.WithRendererOptions(renderer.WithNodeRenderers(
		util.Prioritized(rawAsText{}, 100), util.Prioritized(noImages{}, 100))),
)

// safeSchemes are the link schemes an agent's markdown may use.
var safeSchemes = map[string]bool{"http": true, "https": true, "mailto": true}

// renderMarkdown returns the safe HTML of src; on the (unexpected) failure
// of the renderer, the source as escaped text.
func renderMarkdown(src string) template.HTML {
	if src == "" {
		return ""
	}
	var buf bytes.Buffer
	if err := md.Convert([]byte(src), &buf); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(src) + "</pre>") //nolint:gosec // escaped
	}
	return template.HTML(buf.String()) //nolint:gosec // goldmark escapes raw HTML; linkPolicy filters URLs
}

// safeURL reports whether a link destination may be followed: an absolute
// URL with a scheme of safeSchemes. Relative links would point into the
// inbox itself, so they are dropped too.
func safeURL(dest string) bool {
	u, err := url.Parse(strings.TrimSpace(dest))
	if err != nil || u.Scheme == "" {
		return false
	}
	return safeSchemes[strings.ToLower(u.Scheme)]
}

// linkPolicy rewrites the links and images of a parsed document.
type linkPolicy struct{}

func (linkPolicy) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	source := reader.Source()
	var nodes []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n.(type) {
		case *ast.Link, *ast.Image, *ast.AutoLink:
			nodes = append(nodes, n)
		}
		return ast.WalkContinue, nil
	})
	for _, n := range nodes {
		switch n := n.(type) {
		case *ast.Link:
			if !safeURL(string(n.Destination)) {
				unwrap(n)
				continue
			}
			external(n)
		case *ast.Image:
			// An image would be fetched as the page loads; a link to it
			// is fetched only if the person follows it.
			if !safeURL(string(n.Destination)) {
				unwrap(n)
				continue
			}
			l := ast.NewLink()
			l.Destination, l.Title = n.Destination, n.Title
			moveChildren(n, l)
			if !l.HasChildren() {
				l.AppendChild(l, ast.NewString([]byte("image")))
			}
			external(l)
			n.Parent().ReplaceChild(n.Parent(), n, l)
		case *ast.AutoLink:
			if !safeURL(string(n.URL(source))) {
				n.Parent().ReplaceChild(n.Parent(), n, ast.NewString(n.Label(source)))
				continue
			}
			external(n)
		}
	}
}

// external marks a link to open in a new tab, without telling the target
// where it came from.
func external(n ast.Node) {
	n.SetAttributeString("rel", []byte("noopener noreferrer nofollow"))
	n.SetAttributeString("target", []byte("_blank"))
}

// unwrap replaces a node by its children: a refused link keeps its text.
func unwrap(n ast.Node) {
	parent := n.Parent()
	for c := n.FirstChild(); c != nil; {
		next := c.NextSibling()
		parent.InsertBefore(parent, n, c)
		c = next
	}
	parent.RemoveChild(parent, n)
}

func moveChildren(from, to ast.Node) {
	for c := from.FirstChild(); c != nil; {
		next := c.NextSibling()
		to.AppendChild(to, c)
		c = next
	}
}

// rawAsText renders the raw HTML of an agent's markdown as escaped text,
// so that a person sees what the agent wrote.
type rawAsText struct{}

func (rawAsText) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindRawHTML, func(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if entering {
			segs := n.(*ast.RawHTML).Segments
			for i := range segs.Len() {
				seg := segs.At(i)
				_, _ = w.WriteString(template.HTMLEscapeString(string(seg.Value(source))))
			}
		}
		return ast.WalkSkipChildren, nil
	})
	reg.Register(ast.KindHTMLBlock, func(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		b := n.(*ast.HTMLBlock)
		if entering {
			_, _ = w.WriteString("<p>")
			lines := b.Lines()
			for i := range lines.Len() {
				line := lines.At(i)
				_, _ = w.WriteString(template.HTMLEscapeString(string(line.Value(source))))
			}
			return ast.WalkContinue, nil
		}
		if b.HasClosure() {
			_, _ = w.WriteString(template.HTMLEscapeString(string(b.ClosureLine.Value(source))))
		}
		_, _ = w.WriteString("</p>\n")
		return ast.WalkContinue, nil
	})
}

// noImages renders an image as its alternative text, never as <img>: the
// guarantee that the page loads nothing an agent names does not rest on
// linkPolicy alone finding every image.
type noImages struct{}

func (noImages) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindImage, func(util.BufWriter, []byte, ast.Node, bool) (ast.WalkStatus, error) {
		return ast.WalkContinue, nil // the children (the alt text) render as usual
	})
}
