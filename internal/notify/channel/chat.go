package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Limits of Slack's Block Kit (api.slack.com/reference/block-kit/blocks):
// a header's plain text, a section's text, a button's label and URL.
const (
	slackHeaderMax  = 150
	slackSectionMax = 3000
	slackButtonMax  = 75
	slackURLMax     = 3000
	// slackMaxBlocks is how many blocks a message may hold.
	slackMaxBlocks = 50
)

// Slack posts each Message as a Block Kit message to a Slack incoming
// webhook.
type Slack struct {
	// URL is the incoming webhook's URL, from the channel's Secret.
	URL string
	// Client sends the requests; nil is NewHTTPClient(10s).
	Client *http.Client
	// Clock says how long is left before a deadline; nil is the real
	// clock.
	Clock clock.PassiveClock
}

// Send posts m once.
func (s *Slack) Send(ctx context.Context, m *Message) error {
	body, err := json.Marshal(SlackPayload(m, now(s.Clock)))
	if err != nil {
		return err
	}
	return post(ctx, s.Client, s.URL, body, nil)
}

// SlackPayload is the incoming-webhook payload of m: a fallback text, and
// blocks: a header, one section per question with its options, the
// deadline, the answers of a settled question, the tally and the votes of
// quorum progress, and a button that opens the
// card in the web inbox.
func SlackPayload(m *Message, now time.Time) map[string]any {
	plain := func(s string, n int) map[string]any {
		return map[string]any{"type": "plain_text", "text": truncate(s, n), "emoji": true}
	}
	mrkdwn := func(s string) map[string]any {
		return map[string]any{"type": "mrkdwn", "text": truncate(s, slackSectionMax)}
	}
	blocks := []any{map[string]any{"type": "header", "text": plain(m.Title(), slackHeaderMax)}}
	for _, it := range m.Question.Items {
		if len(blocks) >= slackMaxBlocks-4 {
			break
		}
		var b strings.Builder
		if it.Header != "" {
			fmt.Fprintf(&b, "*%s*\n", slackEscape(it.Header))
		}
		b.WriteString(slackEscape(it.Question))
		for _, o := range it.Options {
			fmt.Fprintf(&b, "\n• %s", slackEscape(o))
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": mrkdwn(b.String())})
	}
	if s := m.Settlement; s != nil && len(s.Answers) > 0 {
		var b strings.Builder
		for i, a := range s.Answers {
			if i > 0 {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "*%s*: %s", slackEscape(a.ID), slackEscape(answerText(a)))
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": mrkdwn(b.String())})
	}
	if qu := m.Quorum; qu != nil {
		var b strings.Builder
		fmt.Fprintf(&b, "*Votes, %s*", slackEscape(qu.Summary()))
		for _, v := range qu.Votes {
			fmt.Fprintf(&b, "\n• %s", slackEscape(voteText(v)))
		}
		blocks = append(blocks, map[string]any{"type": "section", "text": mrkdwn(b.String())})
	}
	elems := []any{mrkdwn(fmt.Sprintf("%s/%s · agent %s", m.Question.Namespace, m.Question.Name, m.Question.Agent))}
	if w := m.When(now); w != "" {
		elems = append(elems, mrkdwn(w))
	}
	blocks = append(blocks, map[string]any{"type": "context", "elements": elems})
	if m.Link != "" && len(m.Link) <= slackURLMax {
		blocks = append(blocks, map[string]any{"type": "actions", "elements": []any{map[string]any{
			"type": "button", "text": plain("Open in hitl", slackButtonMax), "url": m.Link, "style": "primary",
		}}})
	}
	return map[string]any{"text": truncate(m.Title(), slackSectionMax), "blocks": blocks}
}

// slackEscape escapes the three characters Slack's mrkdwn gives a meaning
// to, so that a question's text cannot mention or link.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// Teams posts each Message as an Adaptive Card to a Microsoft Teams
// workflow ("When a Teams webhook request is received").
type Teams struct {
	// URL is the workflow's URL, from the channel's Secret.
	URL string
	// Client sends the requests; nil is NewHTTPClient(10s).
	Client *http.Client
	// Clock says how long is left before a deadline; nil is the real
	// clock.
	Clock clock.PassiveClock
}

// Send posts m once.
func (t *Teams) Send(ctx context.Context, m *Message) error {
	body, err := json.Marshal(TeamsPayload(m, now(t.Clock)))
	if err != nil {
		return err
	}
	return post(ctx, t.Client, t.URL, body, nil)
}

// TeamsPayload is the workflow webhook payload of m: a message with one
// Adaptive Card (version 1.4) attached, holding the title, the questions
// and their options, the deadline, the answers of a settled question, the
// tally and the votes of quorum progress, and an Open URL action to the card in the web inbox.
func TeamsPayload(m *Message, now time.Time) map[string]any {
	text := func(s string, extra map[string]any) map[string]any {
		b := map[string]any{"type": "TextBlock", "text": s, "wrap": true}
		for k, v := range extra {
			b[k] = v
		}
		return b
	}
	body := []any{text(m.Title(), map[string]any{"size": "Medium", "weight": "Bolder"})}
	for _, it := range m.Question.Items {
		if it.Header != "" {
			body = append(body, text(it.Header, map[string]any{"weight": "Bolder", "spacing": "Medium"}))
		}
		body = append(body, text(it.Question, nil))
		for _, o := range it.Options {
			body = append(body, text("- "+o, map[string]any{"spacing": "None"}))
		}
	}
	var facts []any
	if s := m.Settlement; s != nil {
		for _, a := range s.Answers {
			facts = append(facts, map[string]any{"title": a.ID, "value": answerText(a)})
		}
	}
	if qu := m.Quorum; qu != nil {
		facts = append(facts, map[string]any{"title": "Votes", "value": qu.Summary()})
		for _, v := range qu.Votes {
			facts = append(facts, map[string]any{"title": v.By, "value": string(v.Choice)})
		}
	}
	facts = append(facts,
		map[string]any{"title": "Question", "value": m.Question.Namespace + "/" + m.Question.Name},
		map[string]any{"title": "Agent", "value": m.Question.Agent})
	if w := m.When(now); w != "" {
		facts = append(facts, map[string]any{"title": "When", "value": w})
	}
	body = append(body, map[string]any{"type": "FactSet", "facts": facts})
	card := map[string]any{
		"type":    "AdaptiveCard",
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"version": "1.4",
		"body":    body,
	}
	if m.Link != "" {
		card["actions"] = []any{map[string]any{"type": "Action.OpenUrl", "title": "Open in hitl", "url": m.Link}}
	}
	return map[string]any{
		"type": "message",
		"attachments": []any{map[string]any{
			"contentType": "application/vnd.microsoft.card.adaptive",
			"contentUrl":  nil,
			"content":     card,
		}},
	}
}

func now(c clock.PassiveClock) time.Time {
	if c == nil {
		return time.Now()
	}
	return c.Now()
}
