package channel_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/notify/channel"
)

// The platforms' schemas (testdata/README.md says where each comes from):
// the Adaptive Card schema 1.4.0 that Microsoft publishes, and for Slack,
// which publishes no Block Kit schema, one generated from its official
// TypeScript types (@slack/types).
const (
	adaptiveCardSchema = "adaptive-card-1.4.0.json"
	slackSchema        = "slack-incoming-webhook.schema.json"
)

// compileSchema compiles testdata/name, asserting formats (a URL must be
// one).
func compileSchema(t *testing.T, name string) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(name, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// asJSON is v as a JSON document, as it goes on the wire.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// schemaMessages are messages of every kind the chat channels render: each
// event, with and without a link, quorum progress, and a question whose
// texts are long and full of markup.
func schemaMessages() map[string]*channel.Message {
	out := map[string]*channel.Message{}
	for _, ev := range hitlv1.NotificationEvents() {
		m := channel.NewMessage(settled(), ev, "uid-1/"+strings.ToLower(string(ev))+"/ops", t0, "https://inbox.example.com")
		switch ev {
		case hitlv1.EventReminder:
			m.Reminder = &channel.Reminder{Percent: 50}
		case hitlv1.EventEscalated:
			m.Escalation = &channel.Escalation{After: "1h0m0s"}
		}
		out[string(ev)] = m
	}
	out["QuorumProgress with votes"] = progress("https://inbox.example.com")
	out["Asked without a link"] = channel.NewMessage(settled(), hitlv1.EventAsked, "uid-1/asked/ops", t0, "")
	long := settled()
	long.Spec.Questions[0].Header = strings.Repeat("Release <train> & ", 40)
	long.Spec.Questions[0].Question = strings.Repeat("Where <!channel> to? *now* ", 300)
	out["long texts"] = channel.NewMessage(long, hitlv1.EventAsked, "uid-1/asked/ops", t0, "https://inbox.example.com/q/team-a/"+strings.Repeat("x", 200))
	return out
}

// teamsCard is the Adaptive Card of a Teams payload, as JSON.
func teamsCard(t *testing.T, m *channel.Message) map[string]any {
	t.Helper()
	var payload struct {
		Attachments []struct {
			Content map[string]any `json:"content"`
		} `json:"attachments"`
	}
	body, err := json.Marshal(channel.TeamsPayload(m, t0.Add(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &payload); err != nil || len(payload.Attachments) != 1 {
		t.Fatalf("a Teams payload without one attachment (%v): %s", err, body)
	}
	return payload.Attachments[0].Content
}

// slackPayload is a Slack payload as JSON.
func slackPayload(t *testing.T, m *channel.Message) map[string]any {
	t.Helper()
	var payload map[string]any
	body, err := json.Marshal(channel.SlackPayload(m, t0.Add(10*time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &payload); err != nil {
		t.Fatal(err)
	}
	return payload
}

// The card attached to every Teams message is valid under Microsoft's
// Adaptive Card schema 1.4.0 (its version), which allows no property or
// element type it does not define.
func TestTeamsCardIsValidUnderTheAdaptiveCardSchema(t *testing.T) {
	s := compileSchema(t, adaptiveCardSchema)
	for name, m := range schemaMessages() {
		card := teamsCard(t, m)
		if card["version"] != "1.4" {
			t.Fatalf("%s: card version %v, and the schema is 1.4.0's", name, card["version"])
		}
		if err := s.Validate(asJSON(t, card)); err != nil {
			t.Errorf("%s: the card is not valid: %v", name, err)
		}
	}
}

// The payload of every Slack message is valid under the schema of Slack's
// official Block Kit types.
func TestSlackPayloadIsValidUnderTheBlockKitTypes(t *testing.T) {
	s := compileSchema(t, slackSchema)
	for name, m := range schemaMessages() {
		if err := s.Validate(asJSON(t, slackPayload(t, m))); err != nil {
			t.Errorf("%s: the payload is not valid: %v", name, err)
		}
	}
}

// Both schemas refuse a payload that breaks them: the validation above
// would catch a rendering mistake.
func TestSchemasRefuseBrokenPayloads(t *testing.T) {
	cards := compileSchema(t, adaptiveCardSchema)
	slack := compileSchema(t, slackSchema)
	m := progress("https://inbox.example.com")
	cases := []struct {
		name   string
		schema *jsonschema.Schema
		render func(*testing.T, *channel.Message) map[string]any
		spoil  func(map[string]any)
	}{
		{"card: a TextBlock whose wrap is a string", cards, teamsCard, func(c map[string]any) {
			c["body"].([]any)[0].(map[string]any)["wrap"] = "yes"
		}},
		{"card: a property Adaptive Cards do not define", cards, teamsCard, func(c map[string]any) {
			c["body"].([]any)[0].(map[string]any)["colour"] = "red"
		}},
		{"card: an element type of no version", cards, teamsCard, func(c map[string]any) {
			c["body"] = append(c["body"].([]any), map[string]any{"type": "Banner", "text": "x"})
		}},
		{"card: an Action.OpenUrl without its url", cards, teamsCard, func(c map[string]any) {
			delete(c["actions"].([]any)[0].(map[string]any), "url")
		}},
		{"card: a fact without its value", cards, teamsCard, func(c map[string]any) {
			body := c["body"].([]any)
			facts := body[len(body)-1].(map[string]any)["facts"].([]any)
			delete(facts[0].(map[string]any), "value")
		}},
		{"card: a spacing of no enum", cards, teamsCard, func(c map[string]any) {
			c["body"].([]any)[0].(map[string]any)["spacing"] = "Roomy"
		}},
		{"slack: a header of mrkdwn", slack, slackPayload, func(p map[string]any) {
			p["blocks"].([]any)[0].(map[string]any)["text"].(map[string]any)["type"] = "mrkdwn"
		}},
		{"slack: a block type Slack does not know", slack, slackPayload, func(p map[string]any) {
			p["blocks"] = append(p["blocks"].([]any), map[string]any{"type": "banner", "text": "x"})
		}},
		{"slack: a button style of no enum", slack, slackPayload, func(p map[string]any) {
			blocks := p["blocks"].([]any)
			blocks[len(blocks)-1].(map[string]any)["elements"].([]any)[0].(map[string]any)["style"] = "green"
		}},
		{"slack: a section text without its type", slack, slackPayload, func(p map[string]any) {
			delete(p["blocks"].([]any)[1].(map[string]any)["text"].(map[string]any), "type")
		}},
		{"slack: no fallback text", slack, slackPayload, func(p map[string]any) {
			delete(p, "text")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := c.render(t, m)
			if err := c.schema.Validate(asJSON(t, v)); err != nil {
				t.Fatalf("valid before it was broken: %v", err)
			}
			c.spoil(v)
			if err := c.schema.Validate(asJSON(t, v)); err == nil {
				t.Error("the schema took the broken payload")
			}
		})
	}
}
