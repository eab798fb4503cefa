package mcp_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	hitlmcp "github.com/hitl-dev/hitl/internal/mcp"
	. "github.com/hitl-dev/hitl/test/builders"
)

// schemas are the tools' advertised schemas, resolved, to check calls and
// results against as a validating client (the TypeScript SDK checks every
// structuredContent against its tool's output schema) does.
type schemas struct {
	in, out map[string]*jsonschema.Resolved
	raw     map[string]*mcp.Tool
}

func (e *env) schemas(cs *mcp.ClientSession) schemas {
	e.t.Helper()
	tools, err := cs.ListTools(e.ctx, nil)
	e.g.Expect(err).NotTo(HaveOccurred())
	s := schemas{in: map[string]*jsonschema.Resolved{}, out: map[string]*jsonschema.Resolved{}, raw: map[string]*mcp.Tool{}}
	resolve := func(v any) *jsonschema.Resolved {
		data, err := json.Marshal(v)
		e.g.Expect(err).NotTo(HaveOccurred())
		var schema jsonschema.Schema
		e.g.Expect(json.Unmarshal(data, &schema)).To(Succeed())
		r, err := schema.Resolve(nil)
		e.g.Expect(err).NotTo(HaveOccurred())
		return r
	}
	for _, tool := range tools.Tools {
		s.raw[tool.Name] = tool
		s.in[tool.Name] = resolve(tool.InputSchema)
		if tool.OutputSchema != nil {
			s.out[tool.Name] = resolve(tool.OutputSchema)
		}
	}
	return s
}

// conforms checks a tool's arguments and its result against its schemas.
func (s schemas) conforms(g *WithT, tool string, args any, res *mcp.CallToolResult) {
	var v any
	data, err := json.Marshal(args)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(data, &v)).To(Succeed())
	g.Expect(s.in[tool].Validate(v)).To(Succeed(), "%s's arguments fit its input schema", tool)
	if res != nil {
		data, err = json.Marshal(res.StructuredContent)
		g.Expect(err).NotTo(HaveOccurred())
		v = nil
		g.Expect(json.Unmarshal(data, &v)).To(Succeed())
		g.Expect(s.out[tool].Validate(v)).To(Succeed(), "%s's result %s fits its output schema", tool, data)
	}
}

// waitOn calls wait_for_answer with args until it returns something else
// than still waiting (a server with a short max wait on a loaded machine
// may say it more than once), and returns that.
func (e *env) waitOn(cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	e.t.Helper()
	for range 100 {
		res := e.call(cs, e.ctx, "wait_for_answer", args)
		if res.IsError || !structured[hitlmcp.AskOutput](e.g, res).Waiting {
			return res
		}
	}
	e.t.Fatalf("wait_for_answer %v still waiting after 100 calls", args)
	return nil
}

// answersOf is a result's structured answers as JSON values, by id.
func answersOf(g *WithT, res *mcp.CallToolResult) map[string]map[string]any {
	g.Expect(res.IsError).To(BeFalse(), "the call failed: %s", text(res))
	data, err := json.Marshal(res.StructuredContent)
	g.Expect(err).NotTo(HaveOccurred())
	var out struct {
		Answers []map[string]any `json:"answers"`
	}
	g.Expect(json.Unmarshal(data, &out)).To(Succeed())
	byID := map[string]map[string]any{}
	for _, a := range out.Answers {
		byID[a["id"].(string)] = a
	}
	return byID
}

// An ask whose inputs are MCP elicitation primitive schemas: the
// UserQuestion carries them mapped to hitl's form, and the answers come
// back with their values typed in structuredContent (a JSON number for a
// number, a boolean for a boolean), beside what a reader that predates
// typed values decodes.
func TestTypedElicitationSchemas(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	sch := e.schemas(cs)
	args := map[string]any{"callID": "typed-1", "questions": []any{
		map[string]any{"id": "replicas", "question": "How many replicas?", "input": map[string]any{"type": "integer", "minimum": 1, "maximum": 10}},
		map[string]any{"id": "ratio", "question": "Canary share?", "input": map[string]any{"type": "number", "minimum": 0.05, "maximum": 0.5}},
		map[string]any{"id": "when", "question": "When may I deploy?",
			"input": map[string]any{"type": "string", "format": "date-time", "title": "Window", "description": "the start of the window"}},
		map[string]any{"id": "go", "question": "Proceed?", "input": map[string]any{"type": "boolean"}},
		map[string]any{"id": "owner", "question": "Who owns it?", "input": map[string]any{"type": "string", "format": "email", "maxLength": 64}},
		map[string]any{"id": "note", "question": "Anything else?", "input": map[string]any{"type": "string", "maxLength": 100}},
		// hitl's own form, a fractional bound as a string.
		map[string]any{"id": "budget", "question": "Budget?", "input": map[string]any{"type": "number", "minimum": "0.5", "required": true}},
	}}
	done := e.async(cs, e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: args})

	q := e.asked("bot")
	byID := map[string]hitlv1.Question{}
	for _, qq := range q.Spec.Questions {
		byID[qq.ID] = qq
	}
	e.g.Expect(byID["replicas"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputInteger,
		Minimum: ptr.To(intstr.FromInt32(1)), Maximum: ptr.To(intstr.FromInt32(10))}))
	e.g.Expect(byID["ratio"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputNumber,
		Minimum: ptr.To(intstr.FromString("0.05")), Maximum: ptr.To(intstr.FromString("0.5"))}), "fractional bounds as strings")
	e.g.Expect(byID["when"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputDateTime}), "date-time is dateTime")
	e.g.Expect(byID["when"].Header).To(Equal("Window"), "the title, as the header")
	e.g.Expect(byID["when"].Detail).To(Equal("the start of the window"), "the description, as the detail")
	e.g.Expect(byID["go"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputBoolean}))
	e.g.Expect(byID["owner"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputEmail, MaxLength: ptr.To[int32](64)}))
	e.g.Expect(byID["note"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputString, MaxLength: ptr.To[int32](100)}))
	e.g.Expect(byID["budget"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputNumber, Minimum: ptr.To(intstr.FromString("0.5")), Required: true}))

	e.g.Expect(e.admin.Create(e.ctx, Reply("r1", e.ns, q.Name).Custom("replicas", "3").Custom("ratio", "0.25").
		Custom("when", "2026-12-24T18:00:00+01:00").Custom("go", "true").Custom("owner", "ops@example.com").Skip("note").
		Custom("budget", "12.5").Obj())).To(Succeed())
	var got called
	e.g.Eventually(done).Should(Receive(&got))
	e.g.Expect(got.err).NotTo(HaveOccurred())
	sch.conforms(e.g, "ask_user_question", args, got.res)

	answers := answersOf(e.g, got.res)
	e.g.Expect(answers["replicas"]["value"]).To(Equal(float64(3)), "an integer is a JSON number")
	e.g.Expect(answers["ratio"]["value"]).To(Equal(0.25), "a number is a JSON number")
	e.g.Expect(answers["budget"]["value"]).To(Equal(12.5))
	e.g.Expect(answers["when"]["value"]).To(Equal("2026-12-24T18:00:00+01:00"))
	e.g.Expect(answers["go"]["value"]).To(BeTrue(), "a boolean is a JSON boolean")
	e.g.Expect(answers["owner"]["value"]).To(Equal("ops@example.com"))
	e.g.Expect(answers["note"]).NotTo(HaveKey("value"), "a skip has no value")
	raw, err := json.Marshal(got.res.StructuredContent)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(string(raw)).To(ContainSubstring(`"value":3`))
	e.g.Expect(string(raw)).To(ContainSubstring(`"value":true`))

	// The Go types read the same result: the typed one, and the one a
	// reader that predates typed values decodes, unchanged.
	typed := structured[hitlmcp.AskOutput](e.g, got.res)
	e.g.Expect(typed.Answers).To(HaveLen(7))
	e.g.Expect(typed.Answers[0]).To(Equal(hitlmcp.Answer{ID: "replicas", Custom: "3", Value: float64(3)}))
	old := structured[hitlmcp.AskResult](e.g, got.res)
	e.g.Expect(old.Answers[0]).To(Equal(hitlv1.AnswerItem{ID: "replicas", Custom: "3"}))
	e.g.Expect(old.Answers[5]).To(Equal(hitlv1.AnswerItem{ID: "note"}))

	e.g.Expect(text(got.res)).To(ContainSubstring("replicas (How many replicas?): 3\n"))
	e.g.Expect(text(got.res)).To(ContainSubstring("go (Proceed?): true"))
	e.g.Expect(text(got.res)).To(ContainSubstring(`when (When may I deploy?): "2026-12-24T18:00:00+01:00"`))
	e.g.Expect(text(got.res)).To(ContainSubstring("note (Anything else?): (skipped)"))
}

// Enum schemas become options: the titles the labels people select, the
// consts the options' values, which the result returns (one for a
// single-select, a list for a multi-select), through wait_for_answer too.
func TestTypedEnums(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{MaxWait: 300 * time.Millisecond}, nil)
	sch := e.schemas(cs)
	args := map[string]any{"callID": "enum-1", "questions": []any{
		map[string]any{"id": "region", "question": "Which region?", "input": map[string]any{"type": "string",
			"oneOf": []any{map[string]any{"const": "eu-1", "title": "Europe"}, map[string]any{"const": "us-1", "title": "Americas"}}}},
		map[string]any{"id": "size", "question": "Which size?", "input": map[string]any{"type": "string",
			"enum": []any{"s", "m", "l"}, "enumNames": []any{"Small", "Medium", "Large"}}},
		map[string]any{"id": "tier", "question": "Which tier?", "input": map[string]any{"type": "string", "enum": []any{"gold", "silver"}}},
		map[string]any{"id": "features", "question": "Which features?", "input": map[string]any{"type": "array", "minItems": 1, "maxItems": 2,
			"items": map[string]any{"anyOf": []any{map[string]any{"const": "tls", "title": "TLS"}, map[string]any{"const": "gzip", "title": "Compression"}}}}},
		map[string]any{"id": "extras", "question": "Extras?", "input": map[string]any{"type": "array",
			"items": map[string]any{"type": "string", "enum": []any{"logs", "metrics"}}}},
	}}
	res := e.call(cs, e.ctx, "ask_user_question", args)
	sch.conforms(e.g, "ask_user_question", args, res)
	waiting := structured[hitlmcp.AskOutput](e.g, res)
	e.g.Expect(waiting.Waiting).To(BeTrue())

	q := e.asked("bot")
	byID := map[string]hitlv1.Question{}
	for _, qq := range q.Spec.Questions {
		byID[qq.ID] = qq
	}
	e.g.Expect(byID["region"].Options).To(Equal([]hitlv1.QuestionOption{{Label: "Europe", Value: "eu-1"}, {Label: "Americas", Value: "us-1"}}))
	e.g.Expect(byID["region"].MultiSelect).To(BeFalse())
	e.g.Expect(byID["region"].Input).To(BeNil(), "an enum takes no free-text input")
	e.g.Expect(byID["size"].Options).To(Equal([]hitlv1.QuestionOption{{Label: "Small", Value: "s"}, {Label: "Medium", Value: "m"}, {Label: "Large", Value: "l"}}))
	e.g.Expect(byID["tier"].Options).To(Equal([]hitlv1.QuestionOption{{Label: "gold"}, {Label: "silver"}}), "an untitled value is its own label")
	e.g.Expect(byID["features"].Options).To(Equal([]hitlv1.QuestionOption{{Label: "TLS", Value: "tls"}, {Label: "Compression", Value: "gzip"}}))
	e.g.Expect(byID["features"].MultiSelect).To(BeTrue())
	e.g.Expect(byID["features"].Input).To(Equal(&hitlv1.AnswerInput{Type: hitlv1.InputString, Required: true}), "minItems 1: not skippable")
	e.g.Expect(byID["extras"].MultiSelect).To(BeTrue())
	e.g.Expect(byID["extras"].Input).To(BeNil())

	e.g.Expect(e.admin.Create(e.ctx, Reply("r1", e.ns, q.Name).Select("region", "Europe").Select("size", "Medium").
		Select("tier", "silver").Select("features", "TLS", "Compression").Skip("extras").Obj())).To(Succeed())
	wargs := map[string]any{"callID": waiting.CallID, "question": waiting.Question}
	res = e.waitOn(cs, wargs)
	sch.conforms(e.g, "wait_for_answer", wargs, res)
	answers := answersOf(e.g, res)
	e.g.Expect(answers["region"]["value"]).To(Equal("eu-1"), "the const, not the title")
	e.g.Expect(answers["region"]["selected"]).To(Equal([]any{"Europe"}), "selected keeps the labels")
	e.g.Expect(answers["size"]["value"]).To(Equal("m"))
	e.g.Expect(answers["tier"]["value"]).To(Equal("silver"))
	e.g.Expect(answers["features"]["value"]).To(Equal([]any{"tls", "gzip"}), "a multi-select's values, as a list")
	e.g.Expect(answers["extras"]).NotTo(HaveKey("value"))
	e.g.Expect(text(res)).To(ContainSubstring("region (Which region?): Europe (value eu-1)"))
	e.g.Expect(text(res)).To(ContainSubstring("tier (Which tier?): silver\n"))
	e.g.Expect(text(res)).To(ContainSubstring("features (Which features?): TLS, Compression (value tls, gzip)"))

	// A question asked with options of hitl's own form, values included,
	// returns them alike; and list_questions' schema (IntOrString bounds)
	// fits what it returns.
	args = map[string]any{"questions": []any{map[string]any{"id": "env", "question": "Where?",
		"options": []any{map[string]any{"label": "Production", "value": "prod"}, map[string]any{"label": "Staging"}}}}, "timeout": "1m"}
	res = e.call(cs, e.ctx, "ask_user_question", args)
	waiting = structured[hitlmcp.AskOutput](e.g, res)
	e.g.Expect(e.admin.Create(e.ctx, Reply("r2", e.ns, waiting.Question).Select("env", "Production").Obj())).To(Succeed())
	wargs = map[string]any{"callID": waiting.CallID}
	res = e.waitOn(cs, wargs)
	sch.conforms(e.g, "wait_for_answer", wargs, res)
	e.g.Expect(answersOf(e.g, res)["env"]["value"]).To(Equal("prod"))
	list := e.call(cs, e.ctx, "list_questions", map[string]any{})
	sch.conforms(e.g, "list_questions", map[string]any{}, list)
}

// A late reply admitted with admit_reply comes with its typed values.
func TestTypedAdmit(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	sch := e.schemas(cs)
	args := map[string]any{"timeout": "500ms", "questions": []any{
		map[string]any{"id": "count", "question": "How many?", "input": map[string]any{"type": "integer", "minimum": 0}}}}
	res := structured[hitlmcp.AskOutput](e.g, e.call(cs, e.ctx, "ask_user_question", args))
	e.g.Expect(res.Pending).To(BeTrue())
	// list_questions returns the active question's bounds (IntOrString) as
	// its output schema says.
	list := e.call(cs, e.ctx, "list_questions", map[string]any{})
	sch.conforms(e.g, "list_questions", map[string]any{}, list)
	e.g.Expect(structured[hitlmcp.ListResult](e.g, list).Active[0].Questions[0].Input.Minimum).To(Equal(ptr.To(intstr.FromInt32(0))))
	e.g.Expect(e.admin.Create(e.ctx, Reply("late", e.ns, res.Question).Custom("count", "7").Obj())).To(Succeed())
	e.g.Eventually(e.queuedReply(res.Question)).Should(Equal("late"))
	aargs := map[string]any{"question": res.Question, "reply": "late"}
	admitted := e.call(cs, e.ctx, "admit_reply", aargs)
	sch.conforms(e.g, "admit_reply", aargs, admitted)
	e.g.Expect(answersOf(e.g, admitted)["count"]["value"]).To(Equal(float64(7)))
	e.g.Expect(text(admitted)).To(ContainSubstring("count (How many?): 7"))
	// A reader of the result as it was decodes it as before.
	e.g.Expect(structured[hitlmcp.AdmitResult](e.g, admitted).Answers).To(Equal([]hitlv1.AnswerItem{{ID: "count", Custom: "7"}}))
}

// The advertised input schema describes both forms of input, and
// sensitive; the output schema, typed values.
func TestTypedSchemas(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	sch := e.schemas(cs)
	var in struct {
		Properties struct {
			Questions struct {
				Items struct {
					Properties map[string]struct {
						Properties map[string]struct {
							Type any   `json:"type"`
							Enum []any `json:"enum"`
						} `json:"properties"`
						AdditionalProperties any `json:"additionalProperties"`
					} `json:"properties"`
				} `json:"items"`
			} `json:"questions"`
		} `json:"properties"`
	}
	data, err := json.Marshal(sch.raw["ask_user_question"].InputSchema)
	e.g.Expect(err).NotTo(HaveOccurred())
	e.g.Expect(json.Unmarshal(data, &in)).To(Succeed())
	q := in.Properties.Questions.Items.Properties
	e.g.Expect(q).To(HaveKey("sensitive"))
	e.g.Expect(q).To(HaveKey("input"))
	input := q["input"].Properties
	e.g.Expect(input["type"].Enum).To(ConsistOf("string", "number", "integer", "boolean", "date", "dateTime", "email", "uri", "array"))
	e.g.Expect(input["format"].Enum).To(ConsistOf("email", "uri", "date", "date-time"))
	e.g.Expect(input["minimum"].Type).To(Equal([]any{"number", "string"}))
	e.g.Expect(input).To(HaveKey("oneOf"))
	e.g.Expect(input).To(HaveKey("enumNames"))
	e.g.Expect(q["input"].AdditionalProperties).To(Equal(false), "a flat object: cheap to check")

	data, err = json.Marshal(sch.raw["ask_user_question"].OutputSchema)
	e.g.Expect(err).NotTo(HaveOccurred())
	var out struct {
		Properties struct {
			Answers struct {
				Items struct {
					Properties map[string]any `json:"properties"`
				} `json:"items"`
			} `json:"answers"`
		} `json:"properties"`
	}
	e.g.Expect(json.Unmarshal(data, &out)).To(Succeed())
	e.g.Expect(out.Properties.Answers.Items.Properties).To(HaveKey("value"))
	e.g.Expect(out.Properties.Answers.Items.Properties).To(HaveKey("selected"))
	e.g.Expect(out.Properties.Answers.Items.Properties).To(HaveKey("custom"))
	e.g.Expect(out.Properties.Answers.Items.Properties).To(HaveKey("sensitive"))
}

// An input that does not map to hitl's form is refused with BAD_INPUT,
// naming the question and the keyword, and asks nothing.
func TestTypedInputRefused(t *testing.T) {
	e := newEnv(t)
	cs, _ := e.session(e.adminAs("bot"), hitlmcp.Options{}, nil)
	ask := func(input any, extra map[string]any) map[string]any {
		q := map[string]any{"id": "q1", "question": "Well?", "input": input}
		for k, v := range extra {
			q[k] = v
		}
		return map[string]any{"questions": []any{q}}
	}
	enum := func(values ...any) []any { return values }
	for _, c := range []struct {
		name  string
		args  map[string]any
		code  string
		field string
	}{
		{"no type", ask(map[string]any{"minLength": 1}, nil), "BAD_INPUT", "questions[0].input.type"},
		{"an object", ask(map[string]any{"type": "object"}, nil), "BAD_INPUT", "questions[0].input.type"},
		{"an unknown format", ask(map[string]any{"type": "string", "format": "hostname"}, nil), "BAD_INPUT", "questions[0].input.format"},
		{"a default", ask(map[string]any{"type": "string", "default": "x"}, nil), "BAD_INPUT", "questions[0].input.default"},
		{"an unknown keyword", ask(map[string]any{"type": "number", "multipleOf": 2}, nil), "BAD_INPUT", "questions[0].input.multipleOf"},
		{"a format on a number", ask(map[string]any{"type": "number", "format": "date"}, nil), "BAD_INPUT", "questions[0].input.format"},
		{"a bound that is no number", ask(map[string]any{"type": "number", "minimum": "lots"}, nil), "BAD_INPUT", "questions[0].input.minimum"},
		{"a bound that is an object", ask(map[string]any{"type": "number", "maximum": map[string]any{}}, nil), "BAD_INPUT", "questions[0].input.maximum"},
		{"a length on a boolean", ask(map[string]any{"type": "boolean", "minLength": 1}, nil), "BAD_INPUT", "questions[0].input"},
		{"an enum of numbers", ask(map[string]any{"type": "integer", "enum": enum("1", "2")}, nil), "BAD_INPUT", "questions[0].input.enum"},
		{"names that do not match", ask(map[string]any{"type": "string", "enum": enum("a", "b"), "enumNames": enum("A")}, nil), "BAD_INPUT", "questions[0].input.enumNames"},
		{"twice the same title", ask(map[string]any{"type": "string", "oneOf": enum(map[string]any{"const": "a", "title": "A"}, map[string]any{"const": "b", "title": "A"})}, nil),
			"BAD_INPUT", "questions[0].input.oneOf[1]"},
		{"enum and oneOf", ask(map[string]any{"type": "string", "enum": enum("a"), "oneOf": enum(map[string]any{"const": "b"})}, nil), "BAD_INPUT", "questions[0].input.enum"},
		{"a length on an enum", ask(map[string]any{"type": "string", "enum": enum("a"), "maxLength": 3}, nil), "BAD_INPUT", "questions[0].input.maxLength"},
		{"an enum beside options", ask(map[string]any{"type": "string", "enum": enum("a")}, map[string]any{"options": enum(map[string]any{"label": "b"})}),
			"BAD_INPUT", "questions[0].input.enum"},
		{"a single-select enum on a multiSelect question", ask(map[string]any{"type": "string", "enum": enum("a")}, map[string]any{"multiSelect": true}),
			"BAD_INPUT", "questions[0].input.type"},
		{"an array without items", ask(map[string]any{"type": "array"}, nil), "BAD_INPUT", "questions[0].input.items"},
		{"items of numbers", ask(map[string]any{"type": "array", "items": map[string]any{"type": "number", "enum": enum("1")}}, nil), "BAD_INPUT", "questions[0].input.items.type"},
		{"a default in items", ask(map[string]any{"type": "array", "items": map[string]any{"enum": enum("a"), "default": enum("a")}}, nil), "BAD_INPUT", "questions[0].input.items.default"},
		{"two selections required", ask(map[string]any{"type": "array", "minItems": 2, "items": map[string]any{"enum": enum("a", "b")}}, nil), "BAD_INPUT", "questions[0].input.minItems"},
		{"selections capped", ask(map[string]any{"type": "array", "maxItems": 1, "items": map[string]any{"enum": enum("a", "b")}}, nil), "BAD_INPUT", "questions[0].input.maxItems"},
		{"items on a string", ask(map[string]any{"type": "string", "items": map[string]any{"enum": enum("a")}}, nil), "BAD_INPUT", "questions[0].input.items"},
		{"a sensitive enum", ask(map[string]any{"type": "string", "enum": enum("a")}, map[string]any{"sensitive": true}), "BAD_INPUT", "questions[0].sensitive"},
		{"a length as a string", ask(map[string]any{"type": "string", "minLength": "3"}, nil), "BAD_ARGUMENTS", "questions[0].input.minLength"},
		{"an input as a string", ask("integer", nil), "BAD_ARGUMENTS", "questions[0].input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			res, err := cs.CallTool(e.ctx, &mcp.CallToolParams{Name: "ask_user_question", Arguments: c.args})
			g.Expect(err).NotTo(HaveOccurred())
			toolError(g, res, c.code, "("+c.field+")")
			if c.code == "BAD_INPUT" {
				g.Expect(text(res)).To(HavePrefix("BAD_INPUT: question q1: "), "the error names the question")
			}
		})
	}
	list := structured[hitlmcp.ListResult](e.g, e.call(cs, e.ctx, "list_questions", nil))
	e.g.Expect(list.Active).To(BeEmpty(), "nothing was asked")
}

// AskQuestion mirrors every field of a UserQuestion's question, so that a
// field the API gains is one ask_user_question takes (questionOf copies
// them), or this fails.
func TestAskQuestionMirrorsQuestion(t *testing.T) {
	g := NewWithT(t)
	names := func(typ reflect.Type) map[string]string {
		out := map[string]string{}
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			out[name] = typ.Field(i).Name
		}
		return out
	}
	g.Expect(names(reflect.TypeFor[hitlmcp.AskQuestion]())).To(Equal(names(reflect.TypeFor[hitlv1.Question]())))
}
