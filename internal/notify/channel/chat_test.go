package channel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// posted is what a chat webhook received: the body decoded.
func posted(t *testing.T, send func(url string, c *http.Client) error) map[string]any {
	t.Helper()
	var got map[string]any
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("content type %q", r.Header.Get("Content-Type"))
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &got); err != nil {
			t.Errorf("the body is no JSON object: %v", err)
		}
	}))
	defer srv.Close()
	if err := send(srv.URL, srv.Client()); err != nil {
		t.Fatal(err)
	}
	return got
}

// The Block Kit rules checked are those of Slack's reference
// (api.slack.com/reference/block-kit): a top-level fallback text; at most
// 50 blocks of known types; a header of plain_text up to 150 characters; a
// section text up to 3000; context elements of text objects (at most 10);
// an actions block of buttons, each with a plain_text label of at most 75
// characters and a URL of at most 3000.
func TestSlackPayloadFollowsBlockKit(t *testing.T) {
	q := settled()
	q.Spec.Questions[0].Question = strings.Repeat("Where <!channel> to? ", 300)
	m := channel.NewMessage(q, hitlv1.EventSettled, "id", t0, "https://inbox.example.com")
	s := &channel.Slack{}
	got := posted(t, func(url string, c *http.Client) error {
		s.URL, s.Client = url, c
		return s.Send(context.Background(), m)
	})
	if text, _ := got["text"].(string); text == "" {
		t.Error("no fallback text")
	}
	blocks, _ := got["blocks"].([]any)
	if len(blocks) == 0 || len(blocks) > 50 {
		t.Fatalf("%d blocks", len(blocks))
	}
	var button, answers bool
	for i, b := range blocks {
		b := b.(map[string]any)
		switch b["type"] {
		case "header":
			txt := b["text"].(map[string]any)
			if txt["type"] != "plain_text" || len([]rune(txt["text"].(string))) > 150 {
				t.Errorf("block %d: header %v", i, txt)
			}
		case "section":
			txt := b["text"].(map[string]any)["text"].(string)
			if len([]rune(txt)) > 3000 {
				t.Errorf("block %d: a section of %d characters", i, len([]rune(txt)))
			}
			if strings.Contains(txt, "<!channel>") {
				t.Errorf("block %d: an unescaped mention", i)
			}
			answers = answers || strings.Contains(txt, `"ship &lt;it&gt; &amp; go"`)
		case "context":
			els := b["elements"].([]any)
			if len(els) == 0 || len(els) > 10 {
				t.Errorf("block %d: %d context elements", i, len(els))
			}
		case "actions":
			for _, e := range b["elements"].([]any) {
				e := e.(map[string]any)
				label := e["text"].(map[string]any)
				if e["type"] != "button" || label["type"] != "plain_text" || len([]rune(label["text"].(string))) > 75 {
					t.Errorf("block %d: element %v", i, e)
				}
				button = e["url"] == "https://inbox.example.com/q/team-a/deploy"
			}
		default:
			t.Errorf("block %d of type %v", i, b["type"])
		}
	}
	if !button || !answers {
		t.Errorf("button to the card: %v; the settled answers: %v", button, answers)
	}
}

// The Adaptive Card rules checked are those of the Teams workflow webhook
// (a message whose attachments hold one card of content type
// application/vnd.microsoft.card.adaptive) and of the card schema 1.4:
// type AdaptiveCard, a version, body elements of known types with their
// required properties, an Action.OpenUrl with title and url.
func TestTeamsPayloadIsAnAdaptiveCard(t *testing.T) {
	m := channel.NewMessage(settled(), hitlv1.EventReminder, "id", t0, "https://inbox.example.com")
	te := &channel.Teams{}
	got := posted(t, func(url string, c *http.Client) error {
		te.URL, te.Client = url, c
		return te.Send(context.Background(), m)
	})
	if got["type"] != "message" {
		t.Errorf("type %v", got["type"])
	}
	atts := got["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("%d attachments", len(atts))
	}
	att := atts[0].(map[string]any)
	if att["contentType"] != "application/vnd.microsoft.card.adaptive" {
		t.Errorf("content type %v", att["contentType"])
	}
	card := att["content"].(map[string]any)
	if card["type"] != "AdaptiveCard" || card["version"] != "1.4" || card["$schema"] == nil {
		t.Errorf("card %v", card)
	}
	for i, e := range card["body"].([]any) {
		e := e.(map[string]any)
		switch e["type"] {
		case "TextBlock":
			if s, _ := e["text"].(string); s == "" {
				t.Errorf("body %d: a TextBlock without text", i)
			}
		case "FactSet":
			for _, f := range e["facts"].([]any) {
				f := f.(map[string]any)
				if f["title"] == nil || f["value"] == nil {
					t.Errorf("body %d: fact %v", i, f)
				}
				if strings.Contains(f["value"].(string), "ship") {
					t.Errorf("a reminder carries an answer: %v", f)
				}
			}
		default:
			t.Errorf("body %d of type %v", i, e["type"])
		}
	}
	actions := card["actions"].([]any)
	a := actions[0].(map[string]any)
	if len(actions) != 1 || a["type"] != "Action.OpenUrl" || a["title"] == "" || a["url"] != "https://inbox.example.com/q/team-a/deploy" {
		t.Errorf("actions %v", actions)
	}
}

func TestChatErrorsDoNotCarryTheURL(t *testing.T) {
	s := &channel.Slack{URL: "https://127.0.0.1:1/services/T000/B000/SECRETPART", Client: channel.NewHTTPClient(time.Second)}
	err := s.Send(context.Background(), channel.NewMessage(settled(), hitlv1.EventAsked, "id", t0, ""))
	if err == nil || strings.Contains(err.Error(), "SECRETPART") || !channel.Transient(err) {
		t.Errorf("err %v", err)
	}
}

func TestChatMessagesShowTheVotes(t *testing.T) {
	m := progress("https://inbox.example.com")
	s := &channel.Slack{}
	slack := posted(t, func(url string, c *http.Client) error {
		s.URL, s.Client = url, c
		return s.Send(context.Background(), m)
	})
	var sections []string
	for _, b := range slack["blocks"].([]any) {
		if b := b.(map[string]any); b["type"] == "section" {
			sections = append(sections, b["text"].(map[string]any)["text"].(string))
		}
	}
	all := strings.Join(sections, "\n")
	if !strings.Contains(all, "*Votes, approvals 1/2 (1 no)*\n• alice: Approve\n• bob: Reject") || strings.Contains(all, "ship") {
		t.Errorf("Slack sections:\n%s", all)
	}
	if text := slack["text"].(string); text != "bob voted Reject on release-bot's question: approvals 1/2 (1 no)" {
		t.Errorf("Slack text %q", text)
	}

	te := &channel.Teams{}
	teams := posted(t, func(url string, c *http.Client) error {
		te.URL, te.Client = url, c
		return te.Send(context.Background(), m)
	})
	card := teams["attachments"].([]any)[0].(map[string]any)["content"].(map[string]any)
	facts := map[string]string{}
	for _, e := range card["body"].([]any) {
		if e := e.(map[string]any); e["type"] == "FactSet" {
			for _, f := range e["facts"].([]any) {
				f := f.(map[string]any)
				facts[f["title"].(string)] = f["value"].(string)
			}
		}
	}
	if facts["Votes"] != "approvals 1/2 (1 no)" || facts["alice"] != "Approve" || facts["bob"] != "Reject" || facts["notes"] != "" {
		t.Errorf("Teams facts %v", facts)
	}
}
