// Package mcp serves hitl to agents over the Model Context Protocol: the
// tool ask_user_question, which asks people a structured question through a
// UserQuestion and waits like pkg/agent's Ask and AskTimed, but never longer
// than the server's maximum wait, past which it says the question is still
// waiting and wait_for_answer waits on; and the tools list_questions,
// get_queued_replies, admit_reply and cancel_question.
//
// It is built on the official Go SDK (github.com/modelcontextprotocol/go-sdk)
// and is transport-agnostic: `kubectl hitl mcp` serves it over stdio with the
// kubeconfig's identity, and an HTTP server may serve it with one identity
// per request (a CallerFunc decides who each call acts as).
//
// Rule violations are tool errors (isError true) whose text starts with the
// specification's code and names the field, so that a model can correct its
// call; arguments that do not decode are BAD_ARGUMENTS, a caller past its
// cap on concurrent waits gets TOO_MANY_WAITS, and a wait_for_answer for a
// call the agent never made UNKNOWN_CALL.
//
// A call that the client cancels (notifications/cancelled, which clients
// send when their request timeout fires) stops waiting and leaves its
// question as it is: only cancel_question, or the end of a session that is
// the agent's own process (stdio), cancels a question (see disconnected).
package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hitl-dev/hitl/pkg/agent"
	"github.com/hitl-dev/hitl/pkg/sealed"
)

// Codes of this server's own tool errors, beside the specification's codes.
const (
	// CodeBadArguments: the arguments do not decode into the tool's
	// argument type (a wrong JSON type, an unknown field, a missing
	// required field).
	CodeBadArguments = "BAD_ARGUMENTS"
	// CodeTooManyWaits: the caller already has as many waiting calls as the
	// server allows one identity.
	CodeTooManyWaits = "TOO_MANY_WAITS"
	// CodeInternal: the server failed while handling the call.
	CodeInternal = "INTERNAL"
	// CodeUnknownCall: wait_for_answer names a callID (or question) that
	// none of the agent's questions has.
	CodeUnknownCall = "UNKNOWN_CALL"
)

// Defaults of Options.
const (
	DefaultMaxWaits         = 100
	DefaultProgressInterval = 15 * time.Second
	// DefaultMaxWait is below the 60-second request timeout that the
	// official TypeScript SDK gives every request by default, with room
	// for the result to travel back.
	DefaultMaxWait = 50 * time.Second
)

// Caller is who a tool call acts as: an identity, and the agent it asks as.
type Caller struct {
	// Key identifies the caller for the cap on concurrent waits, e.g. its
	// username.
	Key string
	// Client acts as the caller. It should read the API server directly
	// (client.NewWithWatch), not a cache.
	Client client.WithWatch
	// Namespace is where the caller's questions live.
	Namespace string
	// Agent is the agent the caller asks as.
	Agent string
}

// CallerFunc decides who a tool call acts as. An error is returned to the
// client as a tool error.
type CallerFunc func(ctx context.Context, req *mcp.CallToolRequest) (*Caller, error)

// Static is a CallerFunc for a server with one identity, e.g. over stdio.
func Static(c Caller) CallerFunc {
	return func(context.Context, *mcp.CallToolRequest) (*Caller, error) { return &c, nil }
}

// Options configure a Server.
type Options struct {
	// MaxWaits caps the calls of one identity (Caller.Key) that wait at the
	// same time (ask_user_question and admit_reply); past it, a call fails
	// with TOO_MANY_WAITS. Zero means DefaultMaxWaits, negative no cap.
	MaxWaits int
	// ProgressInterval is how often a waiting call sends a progress
	// notification when the client sent a progress token. Zero means
	// DefaultProgressInterval.
	ProgressInterval time.Duration
	// MaxWait bounds how long one ask_user_question or wait_for_answer call
	// waits for an answer: past it the call returns {"waiting": true} and
	// the question stays open, so that a client's request timeout never
	// ends a wait. Zero means DefaultMaxWait, negative no bound (a call
	// waits until the question leaves Open).
	MaxWait time.Duration
	// KeepOnDisconnect keeps the question of a waiting call when the call
	// ends because its session's connection broke or Context ended, as
	// for a call its client cancelled. Set it where a session is not the
	// agent's process (NewHTTPHandler always does). Unset, as over stdio,
	// where the session's end is the agent's process ending, the question
	// is cancelled.
	KeepOnDisconnect bool
	// Version is the server's version, reported to clients.
	Version string
	// Context, when set, bounds every call: when it ends, calls in
	// progress end, and a waiting one cancels its question unless
	// KeepOnDisconnect is set. Use Server.Wait to let them finish.
	Context context.Context
	// SealingKey is the key the server's sensitive questions are sealed
	// to (spec.sealingKey), for every caller, and that opens their
	// answers. Nil means a key New makes and keeps in memory only: the
	// answers to questions asked before the process restarted then no
	// longer open. Give the same key to every replica that may serve a
	// caller's wait_for_answer.
	SealingKey *sealed.Key
	// Logger receives the server's log, and the MCP SDK's (below
	// warnings at debug level): at debug level, every tool call's tool,
	// outcome and duration, and a failed call's error text, never an
	// argument or a result. Nil discards it.
	Logger *slog.Logger
}

// Server holds the tools' state: who calls act as, and the waits each
// identity has open.
type Server struct {
	callers CallerFunc
	opts    Options

	mu    sync.Mutex
	waits map[string]int

	calls sync.WaitGroup
}

// New returns the hitl tools, with calls acting as callers says.
func New(callers CallerFunc, o Options) *Server {
	if o.MaxWaits == 0 {
		o.MaxWaits = DefaultMaxWaits
	}
	if o.ProgressInterval <= 0 {
		o.ProgressInterval = DefaultProgressInterval
	}
	if o.MaxWait == 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.SealingKey == nil {
		// crypto/rand does not fail; were it to, the Agents make their
		// own keys (per call) and sensitive answers open only within it.
		o.SealingKey, _ = sealed.NewKey()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{callers: callers, opts: o, waits: map[string]int{}}
}

// NewServer returns an MCP server with the hitl tools; the same server may
// be connected to any number of sessions and transports.
func NewServer(callers CallerFunc, o Options) *mcp.Server {
	return New(callers, o).MCPServer()
}

// MCPServer returns a new MCP server with the hitl tools, sharing s's state
// (the cap on waits) with every other server s returned.
func (s *Server) MCPServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "hitl", Title: "hitl: ask people", Version: s.opts.Version}, &mcp.ServerOptions{
		Instructions: instructions,
		Capabilities: &mcp.ServerCapabilities{},
		Logger:       slog.New(Relevel{s.opts.Logger.Handler(), quieter}),
	})
	addTool(s, srv, &mcp.Tool{Name: "ask_user_question", Title: "Ask a person", Description: askDescription + s.maxWaitNote()}, s.ask)
	addTool(s, srv, &mcp.Tool{Name: "wait_for_answer", Title: "Wait for the answer", Description: waitDescription + s.maxWaitNote(),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true}}, s.waitTyped)
	addTool(s, srv, &mcp.Tool{Name: "list_questions", Title: "List my questions", Description: listDescription,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.list)
	addTool(s, srv, &mcp.Tool{Name: "get_queued_replies", Title: "Late replies", Description: queuedDescription,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}, s.queued)
	addTool(s, srv, &mcp.Tool{Name: "admit_reply", Title: "Admit a late reply", Description: admitDescription}, s.admit)
	addTool(s, srv, &mcp.Tool{Name: "cancel_question", Title: "Cancel a question", Description: cancelDescription}, s.cancel)
	return srv
}

const instructions = `hitl asks people structured questions through Kubernetes. Call ask_user_question
to ask. When it returns {"waiting": true} nobody has answered yet and the question stays open: call
wait_for_answer with the callID and question it returned, again while it says waiting. With a timeout
an ask may return {"pending": true}: work on, and later call get_queued_replies and admit_reply to take
a late answer as a new turn. A tool call you cancel leaves its question open; cancel_question withdraws it.`

const askDescription = `Ask one or more people-facing questions and wait for the answer.
Each question has an id, the question text, an optional short header, optional detail (markdown),
and optional options [{label, description, value}] (single-select unless multiSelect; a free-text answer comes as "custom").
A question may type its answer with "input", in hitl's form ({"type": "integer", "minimum": 1, "maximum": 10},
types string, number, integer, boolean, date, dateTime, email, uri) or as an MCP elicitation primitive schema
({"type": "string", "format": "date-time"}, {"type": "number", "minimum": 0.5}, {"type": "boolean"},
{"type": "string", "oneOf": [{"const": "eu-1", "title": "Europe"}]}, {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}).
Every answer then carries "value": a number, a boolean, a string, or the selected options' values (an array for multi-select).
"sensitive": true marks a secret (free text only): it is sealed to this server, and only this tool's result holds it in the clear.
Without timeout the question waits until a person answers. With timeout (e.g. "30s") it returns
{"pending": true, "callID": ...} when the window closes unanswered; the question stays answerable
and a late answer arrives through get_queued_replies. Returns {"answers": [{id, selected, custom, value}]}.
A call waits only so long: then it returns {"waiting": true, "question": ..., "callID": ...}; nobody has
answered yet, the question stays open (its window, if any, still runs): call wait_for_answer with that
callID and question to keep waiting, or cancel_question to withdraw it.
When an approval rule governs the question (N people must approve), it settles once enough people voted,
and the result also holds "approval": the rule, its "tally" and its "votes" [{by, choice}].
To require approvals yourself, pass "approval": {"approvals": 2} (stricter than the platform's policies, never weaker).
Example: {"questions":[{"id":"env","question":"Where should I deploy?","options":[{"label":"staging"},{"label":"prod"}]}],"timeout":"2m"}`

const listDescription = `List this agent's questions: the active ones (Open or Continued, in ask order) and the settled
ones with their answers (in settlement order).`

const queuedDescription = `List the late replies queued on this agent's pending (Continued) questions,
each waiting for admit_reply.`

const admitDescription = `Admit a late reply queued on a pending question (from get_queued_replies) as a new turn:
the question settles with it and its answers are returned.`

const cancelDescription = `Cancel one of this agent's questions that is still Open or Continued: people no longer see it.`

const waitDescription = `Wait on for the answer to a question that ask_user_question (or wait_for_answer) left
{"waiting": true}: pass its callID, and its question name. Returns as ask_user_question does: the answers,
{"pending": true} once a timed question's window closed unanswered, or {"waiting": true} again when nobody
answered during this call (call it again). On a settled question it returns the answers at once.`

// maxWaitNote says, in a tool's description, how long one call waits.
func (s *Server) maxWaitNote() string {
	if s.opts.MaxWait < 0 {
		return ""
	}
	return fmt.Sprintf("\nOne call waits at most %s.", s.opts.MaxWait)
}

// handler is a tool's typed handler: the structured result, its text
// rendering, or an error.
type handler[In, Out any] func(ctx context.Context, req *mcp.CallToolRequest, in In) (Out, string, error)

// Wait waits until every tool call in progress has returned, e.g. after
// Options.Context ended or the transport closed, so that the questions of
// aborted asks are cancelled before the process exits.
func (s *Server) Wait() { s.calls.Wait() }

// addTool adds a tool whose schemas are generated from In and Out, and
// whose arguments are decoded here, so that every malformed argument is a
// BAD_ARGUMENTS tool error naming the field, and every error the handler
// returns (coded ones start with their code) is a tool error.
func addTool[In, Out any](s *Server, srv *mcp.Server, t *mcp.Tool, h handler[In, Out]) {
	t.InputSchema = required(mustSchema[In]())
	t.OutputSchema = mustSchema[Out]()
	srv.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (res *mcp.CallToolResult, _ error) {
		s.calls.Add(1)
		defer s.calls.Done()
		start := time.Now()
		// The log has the tool, the outcome and an error's text: never the
		// arguments or the result, which may hold a sensitive answer.
		defer func() {
			if res == nil || res.IsError {
				s.opts.Logger.Debug("Tool call failed", "tool", t.Name, "duration", time.Since(start), "error", errorText(res))
				return
			}
			s.opts.Logger.Debug("Tool call", "tool", t.Name, "duration", time.Since(start))
		}()
		if s.opts.Context != nil {
			var cancel context.CancelCauseFunc
			ctx, cancel = context.WithCancelCause(ctx)
			defer cancel(nil)
			defer context.AfterFunc(s.opts.Context, func() { cancel(errStopping) })()
		}
		defer func() {
			if r := recover(); r != nil {
				s.opts.Logger.Error("Tool call panicked", "tool", t.Name)
				res = toolError(fmt.Errorf("%s: the server failed handling %s: %v\n%s", CodeInternal, t.Name, r, debug.Stack()))
			}
		}()
		var in In
		if err := decode(req.Params.Arguments, &in); err != nil {
			return toolError(err), nil
		}
		out, text, err := h(ctx, req, in)
		if err != nil {
			return toolError(err), nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: out}, nil
	})
}

// Relevel is a slog handler that logs every record at the level Map
// gives it: hitl-mcp hands debug records to zap at V(1), and the server
// logs the MCP SDK's chatter below warnings at debug.
type Relevel struct {
	slog.Handler
	Map func(slog.Level) slog.Level
}

func (h Relevel) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, h.Map(l))
}

func (h Relevel) Handle(ctx context.Context, r slog.Record) error {
	r.Level = h.Map(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h Relevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return Relevel{h.Handler.WithAttrs(attrs), h.Map}
}

func (h Relevel) WithGroup(name string) slog.Handler {
	return Relevel{h.Handler.WithGroup(name), h.Map}
}

// quieter logs the MCP SDK's records below warnings (sessions connected,
// initialized, disconnected: one each per HTTP session) at debug level.
func quieter(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

// errorText is a tool error's first line (an INTERNAL error's stack left
// out).
func errorText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			first, _, _ := strings.Cut(t.Text, "\n")
			return first
		}
	}
	return ""
}

func mustSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: schemaTypes()})
	if err != nil {
		panic(fmt.Sprintf("the schema of %T: %v", *new(T), err))
	}
	return s
}

// schemaTypes are the schemas of the types whose JSON is not their Go
// structure: a bound (a number, or a number as a string), an
// IntOrString (an integer or a string), and a question's input, whose
// type and format take only the values hitl maps. jsonschema.For clones
// them.
var schemaTypes = sync.OnceValue(func() map[reflect.Type]*jsonschema.Schema {
	types := map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[Bound]():              {Types: []string{"number", "string"}},
		reflect.TypeFor[intstr.IntOrString](): {Types: []string{"integer", "string"}},
	}
	input, err := jsonschema.For[Input](&jsonschema.ForOptions{TypeSchemas: types})
	if err != nil {
		panic(fmt.Sprintf("the schema of an input: %v", err))
	}
	enum := func(values ...string) []any {
		out := make([]any, 0, len(values))
		for _, v := range values {
			out = append(out, v)
		}
		return out
	}
	input.Properties["type"].Enum = enum("string", "number", "integer", "boolean", "date", "dateTime", "email", "uri", "array")
	input.Properties["format"].Enum = enum("email", "uri", "date", "date-time")
	items := input.Properties["items"]
	items.Properties["type"].Enum = enum("string")
	types[reflect.TypeFor[Input]()] = input
	return types
})

// required drops "null" from the types of an input schema's properties
// (nil slices and maps): an argument is either given, or left out.
func required(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if len(s.Types) == 2 && s.Types[0] == "null" {
		s.Type, s.Types = s.Types[1], nil
	}
	for _, p := range s.Properties {
		required(p)
	}
	required(s.Items)
	required(s.AdditionalProperties)
	return s
}

func toolError(err error) *mcp.CallToolResult {
	r := &mcp.CallToolResult{}
	r.SetError(err)
	return r
}

// decode reads a tool's arguments into in: absent arguments are an empty
// object; unknown fields and wrong JSON types are BAD_ARGUMENTS.
func decode(raw json.RawMessage, in any) error {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	err := d.Decode(in)
	if err == nil && d.More() {
		err = errors.New("trailing data after the arguments")
	}
	if err == nil {
		return nil
	}
	return decodeError(raw, err, "")
}

// decodeError is the BAD_ARGUMENTS error of err, from decoding raw, the
// value of the argument at path prefix ("" for the arguments themselves,
// e.g. "questions[0].input" for a question's input, which decodes on its
// own: see Input.UnmarshalJSON).
func decodeError(raw json.RawMessage, err error, prefix string) error {
	under := func(field string) string {
		switch {
		case prefix == "":
			return field
		case field == "":
			return prefix
		}
		return prefix + "." + field
	}
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ) && typ.Field == "" && prefix == "":
		return fmt.Errorf("%s: the arguments must be a JSON object, not a JSON %s (arguments)", CodeBadArguments, typ.Value)
	case errors.As(err, &typ):
		field := prefix
		if typ.Field != "" {
			field = under(fieldPath(raw, typ))
		}
		return fmt.Errorf("%s: %s must be %s, not a JSON %s (%s)", CodeBadArguments, field, jsonType(typ.Type.String()), typ.Value, field)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.TrimPrefix(err.Error(), "json: unknown field ")
		return fmt.Errorf("%s: unknown argument %s: see the tool's input schema (%s)", CodeBadArguments, field, under(strings.Trim(field, `"`)))
	default:
		where := prefix
		if where == "" {
			where = "arguments"
		}
		return fmt.Errorf("%s: the arguments do not decode: %v (%s)", CodeBadArguments, err, where)
	}
}

// indexPattern finds the array indices of a decoding error's field path
// (questions.0.options), which are written as questions[0].options.
var indexPattern = regexp.MustCompile(`\.(\d+)`)

// fieldPath is the path of the value a decoding error is about, with its
// array indices: questions[0].options. encoding/json names the field with
// its indices (questions.0.options) in some builds and without them
// (questions.options) in others; without, the first value of the JSON
// type it reports along that path is the one, as the decoder reads in
// order.
func fieldPath(raw json.RawMessage, typ *json.UnmarshalTypeError) string {
	if indexPattern.MatchString(typ.Field) {
		return indexPattern.ReplaceAllString(typ.Field, "[$1]")
	}
	var doc any
	if json.Unmarshal(raw, &doc) != nil {
		return typ.Field
	}
	// An error about a list itself has the list's type; one about an
	// element, the element's.
	elem := typ.Type == nil || typ.Type.Kind() != reflect.Slice && typ.Type.Kind() != reflect.Array
	if path, ok := locate(doc, strings.Split(typ.Field, "."), typ.Value, elem, ""); ok {
		return path
	}
	return typ.Field
}

// locate finds, under v, the first value of JSON type want at the end of
// the field names in fields, stepping into every array on the way, and
// into the one at the end when the error is about an element (elem), and
// returns its path from prefix.
func locate(v any, fields []string, want string, elem bool, prefix string) (string, bool) {
	list, isList := v.([]any)
	if len(fields) == 0 {
		if jsonKind(v) == want {
			return prefix, true
		}
		if !isList || !elem {
			return "", false
		}
	}
	if isList {
		for i, e := range list {
			if path, ok := locate(e, fields, want, elem, fmt.Sprintf("%s[%d]", prefix, i)); ok {
				return path, true
			}
		}
		return "", false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return "", false
	}
	next, ok := obj[fields[0]]
	if !ok {
		return "", false
	}
	if prefix != "" {
		prefix += "."
	}
	return locate(next, fields[1:], want, elem, prefix+fields[0])
}

// jsonKind names v's JSON type as encoding/json's errors do.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "bool"
	case float64:
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return "null"
	}
}

// jsonType names the JSON type a Go type decodes from.
func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case goType == "string" || strings.HasSuffix(goType, "IntentType"):
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint") || strings.HasPrefix(goType, "float"):
		return "a number"
	default:
		return "an object"
	}
}

// caller resolves who a call acts as and the agent for it.
func (s *Server) caller(ctx context.Context, req *mcp.CallToolRequest) (*Caller, *agent.Agent, error) {
	c, err := s.callers(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	a := agent.New(c.Client, c.Namespace, c.Agent)
	if s.opts.SealingKey != nil {
		// One key for the process: an answer to a question asked by one
		// call opens in any later call (wait_for_answer, admit_reply).
		a.UseSealingKey(s.opts.SealingKey)
	}
	return c, a, nil
}

// acquire takes one of key's waits, or fails with TOO_MANY_WAITS.
func (s *Server) acquire(key string) (release func(), err error) {
	if s.opts.MaxWaits < 0 {
		return func() {}, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits[key] >= s.opts.MaxWaits {
		return nil, fmt.Errorf("%s: %s already has %d waiting calls, the most this server allows one identity; "+
			"wait for one to return, or ask with a timeout and collect late answers with get_queued_replies", CodeTooManyWaits, key, s.waits[key])
	}
	s.waits[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.waits[key]--; s.waits[key] <= 0 {
				delete(s.waits, key)
			}
		})
	}, nil
}

// Waits is the number of calls of key that wait now.
func (s *Server) Waits(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waits[key]
}

// progress sends progress notifications every ProgressInterval while a call
// waits, when the client sent a progress token; the returned func stops them.
func (s *Server) progress(ctx context.Context, req *mcp.CallToolRequest, what string) (stop func()) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		start := time.Now()
		t := time.NewTicker(s.opts.ProgressInterval)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      float64(n),
					Message:       fmt.Sprintf("%s (%s so far)", what, time.Since(start).Round(time.Second)),
				})
			}
		}
	}()
	return func() { cancel(); <-done }
}
