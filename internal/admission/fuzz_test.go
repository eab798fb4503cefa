package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	apiextensionscel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
	hitladmission "github.com/hitl-dev/hitl/internal/admission"
)

// This file fuzzes the admission handlers' input handling; see
// FuzzWebhookHandlers.

// The world the handlers see.
const (
	fzNamespace    = "ns"
	fzQuestionName = "q"
	fzQuestionUID  = types.UID("uid-q")
	// fzInjected marks the client failures this harness injects.
	fzInjected = "injected failure"
)

var (
	fzScheme = func() *runtime.Scheme {
		s := runtime.NewScheme()
		if err := clientgoscheme.AddToScheme(s); err != nil {
			panic(err)
		}
		if err := hitlv1.AddToScheme(s); err != nil {
			panic(err)
		}
		return s
	}()
	// fzDecoder tells objects from non-objects for the 400 property.
	fzDecoder = admission.NewDecoder(fzScheme)
	// fzNow is the webhook's clock (whole microseconds, as MicroTime keeps).
	fzNow = time.Date(2026, 1, 2, 3, 4, 5, 123456000, time.UTC)
	// fzHuge is longer than any bound of the CRDs.
	fzHuge = strings.Repeat("h", 40000)
)

// The handlers, in the order the first control byte picks them: the
// webhooks that remain once identity and authorization moved into the
// admission policies (config/policies). Questions have no validating
// webhook any more: who may ask, a conflicting label and the largest
// timeout are the validating policies' to refuse. Claims have none
// either: the claim defaulter only stamps spec.holder and the labels, and
// who may claim (FORBIDDEN) and who may renew or release (NOT_OWNER) are
// the claim-identity and claim-owner policies' rules, not Go code.
const (
	fzQuestionMutate = iota
	fzReplyMutate
	fzReplyValidate
	fzClaimMutate
	fzHandlers
)

var fzHandlerNames = [fzHandlers]string{"question defaulter", "reply defaulter", "reply validator", "claim defaulter"}

// The codes of SPEC §3 the reply validator may deny with; the defaulters
// deny with none.
var fzCodes = map[int][]hitlv1.ErrorCode{
	fzReplyValidate: {hitlv1.CodeNotAnswerable, hitlv1.CodeForbidden, hitlv1.CodeAgentMismatch, hitlv1.CodeReplyQueued, hitlv1.CodeBadAnswer,
		hitlv1.CodeSelfApproval},
}

// fzSpecCodes are all the codes of SPEC §3's table.
var fzSpecCodes = []hitlv1.ErrorCode{
	hitlv1.CodeEmptyQuestions, hitlv1.CodeBadIntent, hitlv1.CodeBadTimeout, hitlv1.CodeDelegatedCaller,
	hitlv1.CodeAgentMismatch, hitlv1.CodeBadAnswer, hitlv1.CodeReplyQueued, hitlv1.CodeNotAnswerable, hitlv1.CodeForbidden,
	hitlv1.CodeAskAborted, hitlv1.CodeNotOwner, hitlv1.CodeSelfApproval,
}

// fzTape hands out the control bytes one at a time, and zeros once they
// run out. Every palette below has its ordinary, benign choice at 0, so a
// short input is an ordinary request.
type fzTape struct {
	data []byte
	pos  int
}

func (t *fzTape) pick(n int) int {
	if t.pos >= len(t.data) {
		t.pos++
		return 0
	}
	b := t.data[t.pos]
	t.pos++
	return int(b) % n
}

var fzOps = []admissionv1.Operation{admissionv1.Create, admissionv1.Create, admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect, "", "PATCH"}

// fzUsers are the requesting users; text is the fuzz string.
func fzUsers(text string) []authenticationv1.UserInfo {
	sa := func(ns, name string) authenticationv1.UserInfo {
		return authenticationv1.UserInfo{
			Username: "system:serviceaccount:" + ns + ":" + name, UID: "uid-sa-" + name,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		}
	}
	return []authenticationv1.UserInfo{
		{Username: "alice", UID: "uid-alice", Groups: []string{"team", "system:authenticated"}},
		sa(fzNamespace, "coder"),  // the agent's own ServiceAccount
		sa(fzNamespace, "runner"), // another ServiceAccount of the namespace
		sa("other", "coder"),      // the agent's name, in another namespace
		sa(fzNamespace, "ghost"),  // no such ServiceAccount
		sa(fzNamespace, "a/b"),
		sa(fzNamespace, ""),
		sa(fzNamespace, "x:y"),
		sa(fzNamespace, ".."),
		{Username: "system:anonymous", Groups: []string{"system:unauthenticated"}},
		{},
		{Username: text, UID: text, Groups: []string{text, ""}},
		{Username: fzHuge},
		{Username: "bob", Extra: map[string]authenticationv1.ExtraValue{"scopes": {"read", "write"}, "": {""}}},
	}
}

// fzCase is one decoded request and the world it meets.
type fzCase struct {
	handler int
	req     admission.Request
	// denied: "verb/agent" pairs the SubjectAccessReview refuses (all
	// others it allows).
	denied                      map[string]bool
	failSAR, failCache, failAPI bool
	// question is the reply's question in the store, or nil.
	question *hitlv1.UserQuestion
	// body, when set, is sent instead of an AdmissionReview of req.
	body []byte
	// beta sends req in a v1beta1 AdmissionReview.
	beta bool
}

func (c *fzCase) injected() bool { return c.failSAR || c.failCache || c.failAPI }

// decodeWebhookCase turns the fuzz input into a request. ctl is read one
// byte per choice, in this order: handler, operation, user, SAR denials,
// injected failure, the question's state, its agent and questions, whether
// it exists, where the object comes from, where the old object comes from,
// the object's namespace, the request's UID and kind, eight bytes for
// the object generator, and then the tenancy rules' bytes (see fzExt).
// text is spliced into names and values; obj and old are used verbatim
// when the control bytes say so.
func decodeWebhookCase(ctl []byte, text string, obj, old []byte) fzCase {
	tape := &fzTape{data: ctl}
	c := fzCase{handler: tape.pick(fzHandlers), denied: map[string]bool{}}
	op := fzOps[tape.pick(len(fzOps))]
	users := fzUsers(text)
	user := users[tape.pick(len(users))]

	// Answering is what the handlers ask the authorizer about: for the
	// agents a question may have (coder, other, text) and the one a reply's
	// conflicting label names (evil), which the handlers must not ask about.
	deny := tape.pick(16)
	for bit, pair := range []string{"answer/evil", "answer/coder", "answer/" + text, "answer/other"} {
		if deny&(1<<bit) != 0 {
			c.denied[pair] = true
		}
	}
	switch tape.pick(16) {
	case 13:
		c.failSAR = true
	case 14:
		c.failCache = true
	case 15:
		c.failAPI = true
	}

	state, shape, absent := tape.pick(8), tape.pick(9), tape.pick(8) == 7
	if !absent {
		c.question = fzWorldQuestion(state, shape, text)
	}

	objSource, oldSource := tape.pick(8), tape.pick(4)
	objNS := []string{fzNamespace, fzNamespace, fzNamespace, fzNamespace, fzNamespace, "", "other", text}[tape.pick(8)]
	meta := tape.pick(8)
	var gen [8]int
	for i := range gen {
		gen[i] = tape.pick(256)
	}
	ext := fzExt{
		askedBy: tape.pick(10), intent: tape.pick(8), refUID: tape.pick(10),
		claimed: tape.pick(12), oldStamp: tape.pick(7),
	}
	if q := c.question; q != nil {
		q.Spec.AskedBy = fzWorldAskedBy(ext.askedBy, user)
		if qs, override := fzIntentQuestions(ext.intent); override {
			q.Spec.Questions = qs
		}
	}

	// The object is of the handler's kind (own) or of another: a reply for
	// the question defaulter, a question for the others. stamp is the
	// askedBy or holder it claims.
	generate := func(own bool, stamp fzStampValue) []byte {
		kind := fzKindOf(c.handler)
		if !own {
			kind = fzKindQuestion
			if kind == fzKindOf(c.handler) {
				kind = fzKindReply
			}
		}
		switch kind {
		case fzKindQuestion:
			return fzQuestionJSON(gen, text, objNS, stamp)
		case fzKindClaim:
			return fzClaimJSON(gen, text, objNS, stamp)
		}
		return fzReplyJSON(gen, text, objNS, user, ext.refUID)
	}
	claimed := fzClaimedStamp(ext.claimed, user, text)
	// The old object's stamp: the object's own (choice 0), or another.
	oldStamp := claimed
	if ext.oldStamp != 0 {
		oldStamp = fzOldStamp(ext.oldStamp, user)
	}
	// Bytes that are not JSON cannot be the object of an AdmissionReview,
	// which is JSON: they are sent as a JSON string instead.
	asJSON := func(b []byte) []byte {
		if json.Valid(b) {
			return b
		}
		quoted, _ := json.Marshal(string(b))
		return quoted
	}
	var raw, oldRaw []byte
	switch objSource {
	case 7:
		raw = asJSON(obj)
	case 6:
		raw = generate(false, claimed) // the other kind
	default:
		raw = generate(true, claimed)
	}
	switch oldSource {
	case 0:
		// The same object, or the same but for its stamp.
		oldRaw = raw
		if objSource < 6 && ext.oldStamp != 0 {
			oldRaw = generate(true, oldStamp)
		}
	case 1:
		oldRaw = asJSON(old)
	case 2:
		oldRaw = nil
	case 3:
		gen[7] = (gen[7] + 1) % 256 // a different object of the same kind
		oldRaw = generate(true, oldStamp)
	}

	kind := metav1.GroupVersionKind{Group: hitlv1.GroupVersion.Group, Version: hitlv1.GroupVersion.Version, Kind: "QuestionReply"}
	resource := metav1.GroupVersionResource{Group: hitlv1.GroupVersion.Group, Version: hitlv1.GroupVersion.Version, Resource: "questionreplies"}
	switch fzKindOf(c.handler) {
	case fzKindQuestion:
		kind.Kind, resource.Resource = "UserQuestion", "userquestions"
	case fzKindClaim:
		kind.Kind, resource.Resource = "QuestionClaim", "questionclaims"
	}
	req := admissionv1.AdmissionRequest{
		UID: "uid-request", Kind: kind, Resource: resource, RequestKind: &kind, RequestResource: &resource,
		Name: "object", Namespace: fzNamespace, Operation: op, UserInfo: user,
		Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: oldRaw},
	}
	switch meta {
	case 3:
		c.beta = true
	case 4:
		req.UID = ""
	case 5:
		req.Kind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}
		req.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "pods"}
		req.RequestKind, req.RequestResource = nil, nil
	case 6:
		req.Name, req.Namespace, req.UID = fzHuge, text, types.UID(text)
	case 7:
		// Not an AdmissionReview of ours: the fuzz bytes are the body.
		c.body = obj
	}
	if op == admissionv1.Delete {
		req.Object = runtime.RawExtension{}
	}
	c.req = admission.Request{AdmissionRequest: req}
	return c
}

// fzQuestionsPalette are the asks of generated questions.
func fzQuestionsPalette(i int) []hitlv1.Question {
	single := hitlv1.Question{ID: "q0", Question: "Which?", Options: []hitlv1.QuestionOption{{Label: "a"}, {Label: "b"}}}
	multi := hitlv1.Question{ID: "q1", Question: "Which ones?", Options: []hitlv1.QuestionOption{{Label: "a"}, {Label: "b"}}, MultiSelect: true}
	approval := hitlv1.Question{ID: "ok", Question: "Run it?", Options: []hitlv1.QuestionOption{{Label: "yes"}, {Label: "no"}},
		Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentApproval, Approval: &hitlv1.ApprovalIntent{Approve: "yes", Reject: "no"}}}
	plan := hitlv1.Question{ID: "plan", Question: "Ship?", Detail: "# Plan", Options: []hitlv1.QuestionOption{{Label: "go"}, {Label: "revise"}},
		Intent: &hitlv1.QuestionIntent{Type: hitlv1.IntentPlanReview, PlanReview: &hitlv1.PlanReviewIntent{Approve: "go"}}}
	poll := single
	poll.Intent = &hitlv1.QuestionIntent{Type: "Poll"}
	return [][]hitlv1.Question{
		{single}, {single, multi}, {plan}, {approval}, {}, nil, {approval, single}, {poll},
	}[i%8]
}

// fzWorldQuestion is the question replies name: its agent and questions
// from shape, its state from state.
func fzWorldQuestion(state, shape int, text string) *hitlv1.UserQuestion {
	q := &hitlv1.UserQuestion{}
	q.Name, q.Namespace, q.UID = fzQuestionName, fzNamespace, fzQuestionUID
	q.CreationTimestamp = metav1.NewTime(fzNow.Add(-time.Minute).Truncate(time.Second))
	q.Spec.Agent = []string{"coder", "other", text}[shape%3]
	q.Labels = map[string]string{hitlv1.AgentLabel: q.Spec.Agent}
	q.Spec.Questions = fzQuestionsPalette([]int{0, 1, 3}[shape/3%3])
	q.Status.State = []hitlv1.QuestionState{hitlv1.StateOpen, hitlv1.StateOpen, hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled, "", hitlv1.StateOpen, hitlv1.StateContinued}[state]
	switch state {
	case 6:
		q.Spec.Cancelled = true
	case 7:
		q.Status.QueuedReply = &hitlv1.QueuedReply{Name: "earlier", Answers: []hitlv1.AnswerItem{{ID: "q0", Selected: []string{"a"}}}}
	}
	return q
}

// fzQuestionJSON generates a UserQuestion from the generator bytes, with
// the spec.askedBy stamp claims.
func fzQuestionJSON(gen [8]int, text, ns string, stamp fzStampValue) []byte {
	q := hitlv1.UserQuestion{TypeMeta: metav1.TypeMeta{APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion"}}
	q.Name, q.Namespace = "asked", ns
	q.Spec.Agent = []string{"coder", "coder", "other", "", text, fzHuge, "Coder", "system:serviceaccount:ns:coder"}[gen[0]%8]
	switch gen[1] % 8 {
	case 3:
		q.Labels = map[string]string{hitlv1.AgentLabel: q.Spec.Agent, "team": "x"}
	case 4:
		q.Labels = map[string]string{hitlv1.AgentLabel: "other"}
	case 5:
		q.Labels = map[string]string{hitlv1.AgentLabel: ""}
	case 6:
		q.Labels = map[string]string{hitlv1.AgentLabel: text}
	case 7:
		q.Labels = map[string]string{"team": "x"}
	}
	q.Spec.Origin = []hitlv1.Origin{"", hitlv1.OriginRoot, hitlv1.OriginSubagent, "weird"}[gen[2]%4]
	q.Spec.Questions = fzQuestionsPalette(gen[3])
	m := fzToMap(q)
	spec := m["spec"].(map[string]any)
	if t := []any{nil, nil, "90s", "0s", "1.5ms", "25h", "-1s", "1h0m0.001s", "soon", 12}[gen[4]%10]; t != nil {
		spec["timeout"] = t
	}
	if a := []any{nil, nil, "2026-01-02T03:04:05.000001Z", "yesterday"}[gen[5]%4]; a != nil {
		spec["askedAt"] = a
	}
	if stamp.set {
		spec["askedBy"] = stamp.value
	}
	return fzHostile(m, gen[6], gen[7], text, "QuestionReply")
}

// fzReplyJSON generates a QuestionReply from the generator bytes; user is
// the requesting user, whose identity it may claim; refUID picks its
// spec.questionRef.uid (fzRefUIDs).
func fzReplyJSON(gen [8]int, text, ns string, user authenticationv1.UserInfo, refUID int) []byte {
	r := hitlv1.QuestionReply{TypeMeta: metav1.TypeMeta{APIVersion: hitlv1.GroupVersion.String(), Kind: "QuestionReply"}}
	r.Name, r.Namespace = "reply", ns
	r.Spec.QuestionRef.Name = []string{fzQuestionName, fzQuestionName, fzQuestionName, fzQuestionName, fzQuestionName, fzQuestionName,
		"missing", "", "a/b", "..", ".", "%2F", text, fzHuge}[gen[0]%14]
	r.Spec.Answers = [][]hitlv1.AnswerItem{
		{{ID: "q0", Selected: []string{"a"}}},
		{{ID: "q0"}},
		{{ID: "q0", Selected: []string{"a"}}, {ID: "zz", Selected: []string{"a"}}},
		{},
		nil,
		{{ID: "q0", Custom: "other"}},
		{{ID: "q0", Selected: []string{"a", "b"}}, {ID: "q1", Selected: []string{"a"}}},
		{{ID: text, Selected: []string{text}}},
		{{ID: "ok", Selected: []string{"yes"}}},  // approves an Approval question
		{{ID: "plan", Selected: []string{"go"}}}, // approves a PlanReview question
	}[gen[1]%10]
	switch gen[2] % 8 {
	case 2:
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: "mallory", UID: "uid-mallory", Groups: []string{"system:masters"}}
	case 3:
		r.Spec.AnsweredBy = &hitlv1.UserInfo{Username: user.Username, UID: user.UID, Groups: user.Groups}
	case 4:
		r.Spec.AnsweredBy = &hitlv1.UserInfo{}
	}
	// The agent label as kubectl hitl and the answerer SDK set it (coder,
	// the usual question's agent), or naming another agent, or empty.
	switch gen[3] % 8 {
	case 1:
		r.Labels = map[string]string{hitlv1.AgentLabel: "evil"}
	case 2:
		r.Labels = map[string]string{hitlv1.QuestionLabel: "x"}
	case 3:
		r.Labels = map[string]string{hitlv1.AgentLabel: "evil", hitlv1.QuestionLabel: "x"}
	case 4:
		r.Labels = map[string]string{hitlv1.AgentLabel: "coder"}
	case 5:
		r.Labels = map[string]string{hitlv1.AgentLabel: ""}
	case 6:
		r.Labels = map[string]string{hitlv1.AgentLabel: text}
	case 7:
		r.Labels = map[string]string{hitlv1.AgentLabel: "coder", hitlv1.QuestionLabel: fzQuestionName}
	}
	switch gen[4] % 4 {
	case 1:
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: fzQuestionName, UID: fzQuestionUID}}
	case 2:
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "uid-cm"}}
	}
	m := fzToMap(r)
	spec := m["spec"].(map[string]any)
	switch gen[2] % 8 {
	case 5:
		spec["answeredBy"] = nil
	case 6:
		// A key the API server's case-sensitive decoding does not know.
		spec["answeredBy"] = map[string]any{"Username": "mallory", "Groups": []any{"system:masters"}}
	case 7:
		spec["answeredBy"] = map[string]any{"username": "mallory", "extra": map[string]any{"scopes": []any{"*"}}}
	}
	if gen[4]%4 == 3 {
		m["metadata"].(map[string]any)["ownerReferences"] = "mine"
	}
	if gen[5]%4 == 1 {
		m["status"] = map[string]any{"outcome": "Applied", "reason": "FORBIDDEN"}
	}
	if uid := fzRefUIDs(refUID, text); uid.set {
		spec["questionRef"].(map[string]any)["uid"] = uid.value
	}
	return fzHostile(m, gen[6], gen[7], text, "UserQuestion")
}

// fzExt are the control bytes after the generator's, for the tenancy
// rules: who asked the world question (fzWorldAskedBy), which intents it
// holds (fzIntentQuestions), the reply's spec.questionRef.uid (fzRefUIDs),
// the spec.askedBy or spec.holder the object claims (fzClaimedStamp) and
// the one the old object holds (fzOldStamp; 0: the object's own).
type fzExt struct {
	askedBy, intent, refUID, claimed, oldStamp int
}

// Offsets of fzExt's bytes in ctl, after the generator's eight.
const (
	fzAtAskedBy = fzAtGen + 8 + iota
	fzAtIntent
	fzAtRefUID
	fzAtClaimed
	fzAtOldStamp
	fzAtEnd
)

// The kinds of object the handlers take.
const (
	fzKindQuestion = iota
	fzKindReply
	fzKindClaim
)

func fzKindOf(handler int) int {
	switch handler {
	case fzQuestionMutate:
		return fzKindQuestion
	case fzClaimMutate:
		return fzKindClaim
	}
	return fzKindReply
}

// fzCoderSA is the agent's ServiceAccount as a stamp: the usual asker.
func fzCoderSA() *hitlv1.UserInfo {
	return &hitlv1.UserInfo{Username: "system:serviceaccount:ns:coder", UID: "uid-sa-coder",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}}
}

// fzWorldAskedBy is the world question's spec.askedBy, against the
// requesting user u: the agent's ServiceAccount (the ordinary case), u
// exactly, u's username with another UID or none, none at all (a question
// asked before spec.askedBy existed), u with other groups, an empty stamp,
// u's username in upper case or with a trailing space, and alice.
func fzWorldAskedBy(i int, u authenticationv1.UserInfo) *hitlv1.UserInfo {
	groups := append([]string(nil), u.Groups...)
	switch i {
	case 1:
		return &hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: groups}
	case 2:
		return &hitlv1.UserInfo{Username: u.Username, UID: "uid-other", Groups: groups}
	case 3:
		return &hitlv1.UserInfo{Username: u.Username}
	case 4:
		return nil
	case 5:
		return &hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: []string{"other-group"}}
	case 6:
		return &hitlv1.UserInfo{}
	case 7:
		return &hitlv1.UserInfo{Username: strings.ToUpper(u.Username), UID: u.UID, Groups: groups}
	case 8:
		return &hitlv1.UserInfo{Username: "alice", UID: "uid-alice", Groups: []string{"team", "system:authenticated"}}
	case 9:
		return &hitlv1.UserInfo{Username: u.Username + " ", UID: u.UID, Groups: groups}
	}
	return fzCoderSA()
}

// fzIntentQuestions replaces the world question's questions (override)
// with: a PlanReview, an Approval beside a plain question, a Poll intent,
// an intent typed "approval" (not the Approval type), a plain question
// beside a PlanReview, an intent with an approval body but no type, and a
// lone Approval.
func fzIntentQuestions(i int) (qs []hitlv1.Question, override bool) {
	single := fzQuestionsPalette(0)[0]
	plan := fzQuestionsPalette(2)[0]
	approval := fzQuestionsPalette(3)[0]
	switch i {
	case 1:
		return []hitlv1.Question{plan}, true
	case 2:
		return []hitlv1.Question{approval, single}, true
	case 3:
		return fzQuestionsPalette(7), true
	case 4:
		single.Intent = &hitlv1.QuestionIntent{Type: "approval", Approval: &hitlv1.ApprovalIntent{Approve: "a"}}
		return []hitlv1.Question{single}, true
	case 5:
		return []hitlv1.Question{single, plan}, true
	case 6:
		single.Intent = &hitlv1.QuestionIntent{Approval: &hitlv1.ApprovalIntent{Approve: "a"}}
		return []hitlv1.Question{single}, true
	case 7:
		return []hitlv1.Question{approval}, true
	}
	return nil, false
}

// fzStampValue is the JSON value a generated object holds at spec.askedBy
// or spec.holder, when set (a nil value is JSON null).
type fzStampValue struct {
	set   bool
	value any
}

func fzStampOf(u *hitlv1.UserInfo) fzStampValue {
	m := map[string]any{"username": u.Username, "uid": u.UID}
	if u.Groups != nil {
		groups := make([]any, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = g
		}
		m["groups"] = groups
	}
	return fzStampValue{set: true, value: m}
}

var fzMallory = &hitlv1.UserInfo{Username: "mallory", UID: "uid-mallory", Groups: []string{"system:masters"}}

// fzClaimedStamp is the spec.askedBy of a generated question, or the
// spec.holder of a generated claim, against the requesting user u: none,
// mallory, u exactly, the agent's ServiceAccount, an empty object, null,
// keys of another case (unknown to the API server), a string, u's
// username with another UID, an unknown field, the fuzz text and a huge
// username.
func fzClaimedStamp(i int, u authenticationv1.UserInfo, text string) fzStampValue {
	switch i {
	case 1:
		return fzStampOf(fzMallory)
	case 2:
		return fzStampOf(&hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: u.Groups})
	case 3:
		return fzStampOf(fzCoderSA())
	case 4:
		return fzStampValue{set: true, value: map[string]any{}}
	case 5:
		return fzStampValue{set: true}
	case 6:
		return fzStampValue{set: true, value: map[string]any{"Username": "mallory", "Groups": []any{"system:masters"}}}
	case 7:
		return fzStampValue{set: true, value: "mallory"}
	case 8:
		return fzStampOf(&hitlv1.UserInfo{Username: u.Username, UID: "uid-other", Groups: u.Groups})
	case 9:
		return fzStampValue{set: true, value: map[string]any{"username": "mallory", "extra": map[string]any{"scopes": []any{"*"}}}}
	case 10:
		return fzStampOf(&hitlv1.UserInfo{Username: text, UID: text, Groups: []string{text}})
	case 11:
		return fzStampOf(&hitlv1.UserInfo{Username: fzHuge})
	}
	return fzStampValue{}
}

// fzOldStamp is the old object's stamp, when not the object's own: the
// agent's ServiceAccount, none, the requesting user u exactly, null,
// mallory, an empty object.
func fzOldStamp(i int, u authenticationv1.UserInfo) fzStampValue {
	switch i {
	case 1:
		return fzStampOf(fzCoderSA())
	case 3:
		return fzStampOf(&hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: u.Groups})
	case 4:
		return fzStampValue{set: true}
	case 5:
		return fzStampOf(fzMallory)
	case 6:
		return fzStampValue{set: true, value: map[string]any{}}
	}
	return fzStampValue{}
}

// fzRefUIDs is a generated reply's spec.questionRef.uid: none, the live
// question's UID, an earlier question's, the fuzz text, a huge one, the
// live one in upper case or with a trailing space, a number, null, and
// the empty string.
func fzRefUIDs(i int, text string) fzStampValue {
	v := []any{nil, string(fzQuestionUID), "uid-earlier", text, fzHuge, strings.ToUpper(string(fzQuestionUID)), string(fzQuestionUID) + " ", 12, nil, ""}[i%10]
	return fzStampValue{set: i%10 != 0, value: v}
}

// fzClaimJSON generates a QuestionClaim from the generator bytes, with the
// spec.holder stamp claims.
func fzClaimJSON(gen [8]int, text, ns string, stamp fzStampValue) []byte {
	c := hitlv1.QuestionClaim{TypeMeta: metav1.TypeMeta{APIVersion: hitlv1.GroupVersion.String(), Kind: "QuestionClaim"}}
	c.Name, c.Namespace = "claim", ns
	c.Spec.QuestionRef.Name = []string{fzQuestionName, fzQuestionName, fzQuestionName, "", text, fzHuge, "a/b", "missing"}[gen[0]%8]
	c.Spec.QuestionRef.UID = []types.UID{"", fzQuestionUID, "uid-earlier", "", types.UID(text), "", "", ""}[gen[0]%8]
	c.Spec.Agent = []string{"coder", "coder", "other", "", text, fzHuge, "Coder", "system:serviceaccount:ns:coder"}[gen[1]%8]
	c.Spec.DurationSeconds = 30
	switch gen[3] % 8 {
	case 1:
		// As the defaulter and the claim-holder policy set them.
		c.Labels = map[string]string{hitlv1.QuestionLabel: fzQuestionName, hitlv1.AgentLabel: "coder"}
	case 2:
		c.Labels = map[string]string{hitlv1.AgentLabel: "evil"}
	case 3:
		c.Labels = map[string]string{hitlv1.QuestionLabel: "other", hitlv1.AgentLabel: "evil", "team": "x"}
	case 4:
		c.Labels = map[string]string{hitlv1.QuestionLabel: "", hitlv1.AgentLabel: ""}
	case 5:
		c.Labels = map[string]string{hitlv1.AgentLabel: text}
	case 6:
		c.Labels = map[string]string{"team": "x"}
	}
	m := fzToMap(c)
	spec := m["spec"].(map[string]any)
	switch gen[4] % 16 {
	case 1:
		spec["durationSeconds"] = 0
	case 2:
		spec["durationSeconds"] = -1
	case 3:
		spec["durationSeconds"] = 301
	case 4:
		spec["durationSeconds"] = int64(1) << 40
	case 5:
		spec["durationSeconds"] = "30"
	case 6:
		delete(spec, "durationSeconds")
	case 7:
		spec["durationSeconds"] = 30.5
	}
	switch gen[5] % 8 {
	case 1:
		spec["renewTime"] = "2026-01-02T03:04:05.000001Z"
	case 2:
		spec["renewTime"] = "yesterday"
	case 3:
		spec["renewTime"] = nil
	}
	switch gen[2] % 8 {
	case 1:
		spec["questionRef"] = nil
	case 2:
		spec["questionRef"] = fzQuestionName
	case 3:
		spec["questionRef"] = map[string]any{"name": fzQuestionName, "uid": 12}
	}
	if stamp.set {
		spec["holder"] = stamp.value
	}
	return fzHostile(m, gen[6], gen[7], text, "QuestionReply")
}

// fzHostile applies up to two hostile edits to a generated object and
// marshals it.
func fzHostile(m map[string]any, e1, e2 int, text, otherKind string) []byte {
	duplicate := false
	for _, e := range []int{e1, e2} {
		switch e % 16 {
		case 8:
			delete(m, "apiVersion")
			delete(m, "kind")
		case 9:
			m["kind"] = otherKind
		case 10:
			m["apiVersion"], m["kind"] = "v1", "Pod"
		case 11:
			m["spec"] = nil
		case 12:
			m["spec"] = text
		case 13:
			m["unknown"] = text
			if spec, ok := m["spec"].(map[string]any); ok {
				spec["x-unknown"] = map[string]any{"agent": "evil"}
			}
		case 14:
			m["metadata"] = []any{text}
		case 15:
			duplicate = true
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	if duplicate {
		// A second spec, after the real one: which one wins is up to the
		// decoder, and the patch must still be right.
		out = append(out[:len(out)-1], []byte(`,"spec":{"agent":"evil","questionRef":{"name":"q"},"answeredBy":{"username":"mallory"}}}`)...)
	}
	return out
}

func fzToMap(obj any) map[string]any {
	b, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	return m
}

// fzRESTReader stands in for the manager's API reader, which is a REST
// client: client-go's request builder refuses an empty name, or one that is
// not a valid path segment, before anything is sent (rest.Request.Name);
// this reader refuses the same names with the same messages, and reads
// everything else from the fake client.
type fzRESTReader struct {
	client.Reader
	fail bool
}

func (r fzRESTReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Name == "" {
		return errors.New("resource name may not be empty")
	}
	if msgs := rest.IsValidPathSegmentName(key.Name); len(msgs) != 0 {
		return fmt.Errorf("invalid resource name %q: %v", key.Name, msgs)
	}
	if r.fail {
		return errors.New(fzInjected + ": API reader")
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// fzSAR is a SubjectAccessReview the handler sent.
type fzSAR struct {
	spec    authorizationv1.SubjectAccessReviewSpec
	allowed bool
}

// fzStores caches the fake stores by the question they hold: building a
// fake client is the slowest part of a case, and the handlers only read.
var (
	fzStoresMu sync.Mutex
	fzStores   = map[string]fzStored{}
)

type fzStored struct {
	store    client.WithWatch
	question *hitlv1.UserQuestion
}

// fzStore returns a fake client holding a few ServiceAccounts (which no
// handler may need: no rule reads them any more) and the question (when not
// nil), and the question as the store keeps it (JSON turns invalid UTF-8
// into U+FFFD), which is what the handlers read.
func fzStore(question *hitlv1.UserQuestion) (client.WithWatch, *hitlv1.UserQuestion) {
	key := "none"
	if question != nil {
		b, err := json.Marshal(question)
		if err != nil {
			panic(err)
		}
		key = string(b)
	}
	fzStoresMu.Lock()
	defer fzStoresMu.Unlock()
	if s, ok := fzStores[key]; ok {
		return s.store, s.question.DeepCopy()
	}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: fzNamespace, Name: "coder"}},
		// The annotation that once let a ServiceAccount ask as an agent;
		// it must not matter to anything now.
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: fzNamespace, Name: "runner", Annotations: map[string]string{hitlv1.AgentLabel: "coder"}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "coder"}},
	}
	if question != nil {
		objs = append(objs, question.DeepCopy())
	}
	store := fake.NewClientBuilder().WithScheme(fzScheme).WithObjects(objs...).Build()
	var stored *hitlv1.UserQuestion
	if question != nil {
		stored = &hitlv1.UserQuestion{}
		if err := store.Get(context.Background(), client.ObjectKeyFromObject(question), stored); err != nil {
			panic(err)
		}
	}
	if len(fzStores) > 512 {
		clear(fzStores)
	}
	fzStores[key] = fzStored{store: store, question: stored}
	return store, stored.DeepCopy()
}

// fzHandler builds the case's handler the way ctrl.NewWebhookManagedBy
// does (admission.WithDefaulter / WithValidator with the manager's
// scheme), but without panic recovery, over a fake client holding the
// case's world. sars collects the SubjectAccessReviews it sends.
func fzHandler(c *fzCase, sars *[]fzSAR) *admission.Webhook {
	store, stored := fzStore(c.question)
	c.question = stored
	cl := interceptor.NewClient(store, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			sar, ok := obj.(*authorizationv1.SubjectAccessReview)
			if !ok {
				return cl.Create(ctx, obj, opts...)
			}
			if c.failSAR {
				return errors.New(fzInjected + ": SubjectAccessReview")
			}
			allowed := false
			if ra := sar.Spec.ResourceAttributes; ra != nil {
				allowed = !c.denied[ra.Verb+"/"+ra.Name]
			}
			sar.Status.Allowed = allowed
			*sars = append(*sars, fzSAR{spec: *sar.Spec.DeepCopy(), allowed: allowed})
			return nil
		},
		Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, isQuestion := obj.(*hitlv1.UserQuestion); isQuestion && c.failCache {
				return errors.New(fzInjected + ": cache")
			}
			return cl.Get(ctx, key, obj, opts...)
		},
	})
	reader := fzRESTReader{Reader: store, fail: c.failAPI}

	qw := &hitladmission.QuestionWebhook{Clock: clocktesting.NewFakePassiveClock(fzNow), Client: cl}
	rw := &hitladmission.ReplyWebhook{Client: cl, APIReader: reader}
	var wh *admission.Webhook
	switch c.handler {
	case fzQuestionMutate:
		wh = admission.WithDefaulter[*hitlv1.UserQuestion](fzScheme, qw)
	case fzReplyMutate:
		wh = admission.WithDefaulter[*hitlv1.QuestionReply](fzScheme, rw)
	case fzReplyValidate:
		wh = admission.WithValidator[*hitlv1.QuestionReply](fzScheme, rw)
	case fzClaimMutate:
		wh = admission.WithDefaulter[*hitlv1.QuestionClaim](fzScheme, &hitladmission.ClaimWebhook{})
	}
	return wh.WithRecoverPanic(false)
}

// fzDecodes reports whether raw decodes into a fresh object of the
// handler's kind, and returns it.
func fzDecodes[T client.Object](raw []byte, into T) (T, bool) {
	if len(raw) == 0 {
		return into, false
	}
	return into, fzDecoder.DecodeRaw(runtime.RawExtension{Raw: raw}, into) == nil
}

// runWebhookCase handles the case's request and checks the properties. It
// returns a short name of the outcome, for the sweep's statistics.
func runWebhookCase(t *testing.T, c fzCase) string {
	t.Helper()
	var sars []fzSAR
	wh := fzHandler(&c, &sars)
	name := fzHandlerNames[c.handler]

	// Serve the request over HTTP, as the webhook server does.
	body := c.body
	if body == nil {
		review := admissionv1.AdmissionReview{Request: &c.req.AdmissionRequest}
		review.APIVersion, review.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
		if c.beta {
			review.APIVersion = "admission.k8s.io/v1beta1"
		}
		var err error
		if body, err = json.Marshal(review); err != nil {
			t.Fatalf("encoding the review: %v", err)
		}
	}
	httpReq := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
	httpReq.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	wh.ServeHTTP(rec, httpReq)
	var answer admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &answer); err != nil || answer.Response == nil {
		t.Fatalf("%s: the webhook answered HTTP %d with %.300q (%v), not an AdmissionReview response", name, rec.Code, rec.Body.Bytes(), err)
	}
	resp := admission.Response{AdmissionResponse: *answer.Response}
	if resp.Result == nil {
		t.Fatalf("%s: a response without a result", name)
	}

	// The request as the handler read it from the body.
	var seen admissionv1.AdmissionReview
	if c.body != nil {
		// Only a response is owed for a body of fuzz bytes, and a denial
		// is a decode error, a code or an injected failure.
		if !resp.Allowed && resp.Result.Code != http.StatusBadRequest && !fzCoded(resp.Result.Message) &&
			!(c.injected() && strings.Contains(resp.Result.Message, fzInjected)) {
			t.Fatalf("%s: body %.300q: a denial (HTTP %d) that is neither a decode error nor coded: %q", name, body, resp.Result.Code, fzShort(resp.Result.Message))
		}
		return "any body"
	}
	if err := json.Unmarshal(body, &seen); err != nil || seen.Request == nil {
		t.Fatalf("decoding our own review: %v", err)
	}
	req := admission.Request{AdmissionRequest: *seen.Request}
	c.req = req
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s, %s by %q: %s\nobject: %.600s\nold object: %.300s\nresponse: allowed %v, result %+v, patch %.600s",
			name, req.Operation, fzShort(req.UserInfo.Username), fmt.Sprintf(format, args...),
			req.Object.Raw, req.OldObject.Raw, resp.Allowed, resp.Result, resp.Patch)
	}

	if resp.UID != req.UID {
		fail("the response's UID %q is not the request's %q", resp.UID, req.UID)
	}

	// Which bytes must decode for the handler to get anywhere.
	decodes := func(raw []byte) bool {
		var ok bool
		switch fzKindOf(c.handler) {
		case fzKindQuestion:
			_, ok = fzDecodes(raw, &hitlv1.UserQuestion{})
		case fzKindClaim:
			_, ok = fzDecodes(raw, &hitlv1.QuestionClaim{})
		default:
			_, ok = fzDecodes(raw, &hitlv1.QuestionReply{})
		}
		return ok
	}
	mutating := c.handler != fzReplyValidate
	var mayBe400 bool
	switch {
	case mutating:
		mayBe400 = req.Operation != admissionv1.Delete && !decodes(req.Object.Raw)
	case req.Operation == admissionv1.Create:
		mayBe400 = !decodes(req.Object.Raw)
	case req.Operation == admissionv1.Update:
		mayBe400 = !decodes(req.Object.Raw) || !decodes(req.OldObject.Raw)
	case req.Operation == admissionv1.Delete:
		mayBe400 = !decodes(req.OldObject.Raw)
	case req.Operation == admissionv1.Connect:
	default:
		mayBe400 = true // an operation the validator does not know
	}

	// The SubjectAccessReviews are about the requesting user.
	for _, s := range sars {
		u := req.UserInfo
		extra := map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		ra := s.spec.ResourceAttributes
		if s.spec.User != u.Username || s.spec.UID != u.UID || !reflect.DeepEqual(fzNonEmpty(s.spec.Groups), fzNonEmpty(u.Groups)) ||
			!reflect.DeepEqual(fzNonEmptyMap(s.spec.Extra), fzNonEmptyMap(extra)) {
			fail("a SubjectAccessReview asks about %q %v %v, not the requesting user", fzShort(s.spec.User), s.spec.Groups, s.spec.Extra)
		}
		if ra == nil || ra.Group != hitlv1.GroupVersion.Group || ra.Resource != hitlv1.AgentsResource || ra.Subresource != "" {
			fail("a SubjectAccessReview asks about %+v, not hitl.dev agents", ra)
		}
	}

	// Every denial is coded, a decode error, or an injected failure.
	code := hitlv1.ErrorCode("")
	if !resp.Allowed {
		msg := resp.Result.Message
		for _, cd := range fzSpecCodes {
			if strings.HasPrefix(msg, string(cd)+": ") {
				code = cd
			}
		}
		switch {
		case code != "":
			ok := false
			for _, cd := range fzCodes[c.handler] {
				ok = ok || cd == code
			}
			if !ok {
				fail("the %s denies with %s, which is not its code", name, code)
			}
		case resp.Result.Code == http.StatusBadRequest:
			if !mayBe400 {
				fail("an HTTP 400 for an object that decodes: %s", msg)
			}
			return "400"
		case resp.Result.Code == http.StatusInternalServerError && strings.Contains(msg, fzInjected):
			if !c.injected() {
				fail("an injected failure that was not injected")
			}
			return "500 injected"
		default:
			fail("a denial (HTTP %d) whose message starts with no code of SPEC §3: %q", resp.Result.Code, fzShort(msg))
		}
	} else if resp.Result.Code != http.StatusOK && resp.Result.Code != 0 {
		fail("allowed with HTTP %d", resp.Result.Code)
	}
	if mayBe400 && (resp.Allowed || code != "") {
		fail("bytes that do not decode were not refused as such")
	}

	switch c.handler {
	case fzQuestionMutate, fzReplyMutate, fzClaimMutate:
		if !resp.Allowed {
			fail("the defaulter denies")
		}
		if req.Operation == admissionv1.Delete {
			if len(resp.Patch) > 0 {
				fail("a patch for a deletion")
			}
			return "allowed"
		}
		patched := req.Object.Raw
		if len(resp.Patch) > 0 {
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				fail("patch type %v", resp.PatchType)
			}
			var err error
			if patched, err = fzApplyJSONPatch(req.Object.Raw, resp.Patch); err != nil {
				fail("the patch does not apply to the object: %v", err)
			}
		}
		outcome := "allowed"
		if len(resp.Patch) > 0 {
			outcome = "patched"
		}
		switch c.handler {
		case fzQuestionMutate:
			if verdict := fzCheckQuestionDefaults(c, patched, fail); verdict != "" {
				outcome = verdict
			}
		case fzClaimMutate:
			fzCheckClaimDefaults(c, patched, fail)
		default:
			fzCheckReplyDefaults(c, patched, fail)
		}
		return outcome
	default:
		return fzCheckReplyVerdict(c, code, resp, sars, fail)
	}
}

// fzApplyJSONPatch applies an RFC 6902 JSON patch of add, remove and
// replace operations (the ones admission patches use) to a JSON document,
// as the API server applies a webhook's patch.
func fzApplyJSONPatch(doc, patch []byte) ([]byte, error) {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return nil, fmt.Errorf("the patch: %w", err)
	}
	decode := func(b []byte) (any, error) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		return v, d.Decode(&v)
	}
	root, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("the document: %w", err)
	}
	for _, op := range ops {
		var value any
		if op.Op == "add" || op.Op == "replace" {
			if value, err = decode(op.Value); err != nil {
				return nil, fmt.Errorf("%s %s: the value: %w", op.Op, op.Path, err)
			}
		} else if op.Op != "remove" {
			return nil, fmt.Errorf("unexpected operation %q", op.Op)
		}
		if op.Path == "" {
			if op.Op == "remove" {
				return nil, errors.New("remove of the whole document")
			}
			root = value
			continue
		}
		if !strings.HasPrefix(op.Path, "/") {
			return nil, fmt.Errorf("path %q", op.Path)
		}
		tokens := strings.Split(op.Path[1:], "/")
		for i, tok := range tokens {
			tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		}
		// Walk to the parent, then change its child; set writes a new
		// container back into its own parent.
		var apply func(node any, tokens []string) (any, error)
		apply = func(node any, tokens []string) (any, error) {
			tok, last := tokens[0], len(tokens) == 1
			switch n := node.(type) {
			case map[string]any:
				child, exists := n[tok]
				switch {
				case !last:
					if !exists {
						return nil, fmt.Errorf("%s %s: no %q", op.Op, op.Path, tok)
					}
					c, err := apply(child, tokens[1:])
					if err != nil {
						return nil, err
					}
					n[tok] = c
				case op.Op == "add":
					n[tok] = value
				case !exists:
					return nil, fmt.Errorf("%s %s: no %q", op.Op, op.Path, tok)
				case op.Op == "replace":
					n[tok] = value
				default:
					delete(n, tok)
				}
				return n, nil
			case []any:
				i := len(n)
				if tok != "-" || op.Op != "add" || !last {
					var err error
					if i, err = strconv.Atoi(tok); err != nil || i < 0 || i > len(n) || (i == len(n) && op.Op != "add") {
						return nil, fmt.Errorf("%s %s: index %q of %d", op.Op, op.Path, tok, len(n))
					}
				}
				switch {
				case !last:
					c, err := apply(n[i], tokens[1:])
					if err != nil {
						return nil, err
					}
					n[i] = c
				case op.Op == "add":
					n = append(n[:i], append([]any{value}, n[i:]...)...)
				case op.Op == "replace":
					n[i] = value
				default:
					n = append(n[:i], n[i+1:]...)
				}
				return n, nil
			default:
				return nil, fmt.Errorf("%s %s: %q is inside neither an object nor an array", op.Op, op.Path, tok)
			}
		}
		if root, err = apply(root, tokens); err != nil {
			return nil, err
		}
	}
	return json.Marshal(root)
}

// The harness's JSON patch applier, on the paths admission patches take.
func TestFzApplyJSONPatch(t *testing.T) {
	doc := `{"metadata":{"labels":{"hitl.dev/agent":"a"}},"spec":{"l":[1,2,3]}}`
	cases := []struct{ patch, want string }{
		{`[]`, doc},
		{`[{"op":"replace","path":"/metadata/labels/hitl.dev~1agent","value":"b"}]`, `{"metadata":{"labels":{"hitl.dev/agent":"b"}},"spec":{"l":[1,2,3]}}`},
		{`[{"op":"add","path":"/metadata/labels/x~0y","value":"c"}]`, `{"metadata":{"labels":{"hitl.dev/agent":"a","x~y":"c"}},"spec":{"l":[1,2,3]}}`},
		{`[{"op":"remove","path":"/metadata/labels"}]`, `{"metadata":{},"spec":{"l":[1,2,3]}}`},
		{`[{"op":"add","path":"/spec/l/1","value":9},{"op":"remove","path":"/spec/l/0"},{"op":"add","path":"/spec/l/-","value":{"k":1}}]`, `{"metadata":{"labels":{"hitl.dev/agent":"a"}},"spec":{"l":[9,2,3,{"k":1}]}}`},
		{`[{"op":"replace","path":"/spec/l/3","value":1}]`, "error"},
		{`[{"op":"remove","path":"/spec/m"}]`, "error"},
		{`[{"op":"add","path":"/spec/m/n","value":1}]`, "error"},
		{`[{"op":"move","path":"/spec","from":"/metadata"}]`, "error"},
	}
	for _, tc := range cases {
		got, err := fzApplyJSONPatch([]byte(doc), []byte(tc.patch))
		if tc.want == "error" {
			if err == nil {
				t.Errorf("%s: applied, want an error", tc.patch)
			}
			continue
		}
		var g, w any
		if err != nil || json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(tc.want), &w) != nil {
			t.Fatalf("%s: %v", tc.patch, err)
		}
		if gj, wj := fmt.Sprint(g), fmt.Sprint(w); gj != wj {
			t.Errorf("%s: got %s, want %s", tc.patch, got, tc.want)
		}
	}
}

// fzCheckQuestionDefaults: the defaulted question is the input with the
// agent label set when it was missing, on creation spec.askedAt set when
// the client did not send it and spec.askedBy stamped from the requester,
// and on update a missing spec.askedBy taken from the stored question;
// nothing else. On update it then checks the CRD's rule on what the
// defaulter lets through (fzCheckAskedByKept), and returns the outcome
// when that differs from the defaulter's own.
func fzCheckQuestionDefaults(c fzCase, patched []byte, fail func(string, ...any)) string {
	orig, _ := fzDecodes(c.req.Object.Raw, &hitlv1.UserQuestion{})
	got, ok := fzDecodes(patched, &hitlv1.UserQuestion{})
	if !ok {
		fail("the defaulted question does not decode: %.300s", patched)
	}
	want := orig.DeepCopy()
	if _, set := orig.Labels[hitlv1.AgentLabel]; !set && orig.Spec.Agent != "" {
		if want.Labels == nil {
			want.Labels = map[string]string{}
		}
		want.Labels[hitlv1.AgentLabel] = orig.Spec.Agent
	}
	if c.req.Operation == admissionv1.Create && orig.Spec.AskedAt == nil {
		want.Spec.AskedAt = &metav1.MicroTime{Time: fzNow}
	}
	switch {
	case c.req.Operation == admissionv1.Create:
		// Who asked is the requester, whatever the client sent.
		u := c.req.UserInfo
		want.Spec.AskedBy = &hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: u.Groups}
	case c.req.Operation == admissionv1.Update && orig.Spec.AskedBy == nil:
		// An update that leaves it out keeps the stored one.
		if old, ok := fzDecodes(c.req.OldObject.Raw, &hitlv1.UserQuestion{}); ok {
			want.Spec.AskedBy = old.Spec.AskedBy
		}
	}
	if got.Spec.AskedBy != nil && len(got.Spec.AskedBy.Groups) == 0 {
		got.Spec.AskedBy.Groups = nil
	}
	if want.Spec.AskedBy != nil && len(want.Spec.AskedBy.Groups) == 0 {
		want.Spec.AskedBy.Groups = nil
	}
	if got.Spec.AskedAt != nil {
		got.Spec.AskedAt.Time = got.Spec.AskedAt.UTC()
	}
	if want.Spec.AskedAt != nil {
		want.Spec.AskedAt.Time = want.Spec.AskedAt.UTC()
	}
	if !reflect.DeepEqual(got, want) {
		fail("the defaulted question is\n%+v\nwant\n%+v", got, want)
	}
	if c.req.Operation != admissionv1.Update {
		return ""
	}
	old, ok := fzDecodes(c.req.OldObject.Raw, &hitlv1.UserQuestion{})
	if !ok {
		return "" // a stored question always decodes
	}
	return fzCheckAskedByKept(got, old, fail)
}

// The outcomes of fzCheckAskedByKept besides the defaulter's own.
const (
	fzOutcomeCRDRefused = "NOT_OWNER (CRD)"
)

// fzCheckAskedByKept checks what the API server makes of an update the
// question defaulter let through (got, over the stored question old): a
// stamped spec.askedBy is immutable and a question asked without one never
// gains one, so the CRD refuses, with NOT_OWNER naming spec.askedBy,
// exactly the updates that change, drop or add it; and what it stores
// keeps the stamp, so no caller forges one.
func fzCheckAskedByKept(got, old *hitlv1.UserQuestion, fail func(string, ...any)) string {
	changed := !fzSameStamp(got.Spec.AskedBy, old.Spec.AskedBy)
	refused, msg, err := fzAskedByRule(got, old)
	if err != nil {
		fail("evaluating the CRD's rules: %v", err)
	}
	stamp := func(u *hitlv1.UserInfo) string {
		if u == nil {
			return "none"
		}
		return fmt.Sprintf("%q uid %q groups %q", fzShort(u.Username), fzShort(u.UID), u.Groups)
	}
	switch {
	case refused && !changed:
		fail("the CRD refuses an update that keeps spec.askedBy (%s, stored %s): %s", stamp(got.Spec.AskedBy), stamp(old.Spec.AskedBy), msg)
	case !refused && changed:
		fail("the CRD lets an update change spec.askedBy from %s to %s", stamp(old.Spec.AskedBy), stamp(got.Spec.AskedBy))
	case refused:
		if !strings.HasPrefix(msg, string(hitlv1.CodeNotOwner)+": ") || !strings.Contains(msg, "spec.askedBy") {
			fail("the CRD refuses a changed spec.askedBy with %q, not NOT_OWNER naming spec.askedBy", msg)
		}
		return fzOutcomeCRDRefused
	}
	return ""
}

// fzSameStamp: two stamps are equal field by field (CEL's ==), a missing
// list of groups being an empty one.
func fzSameStamp(a, b *hitlv1.UserInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Username == b.Username && a.UID == b.UID && reflect.DeepEqual(fzNonEmpty(a.Groups), fzNonEmpty(b.Groups))
}

// The API server's CEL limits for CRD rules (k8s.io/apiserver's
// celconfig.PerCallLimit and RuntimeCELCostBudget).
const (
	fzCELPerCallLimit = 1000000
	fzCELCostBudget   = 10000000
)

// fzQuestionCRD is the UserQuestion CRD's structural schema and the CEL
// validator of its x-kubernetes-validations, as the API server builds
// them, from the generated CRD this repository installs.
var fzQuestionCRD = sync.OnceValues(func() (*fzCRD, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "hitl.dev_userquestions.yaml"))
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		return nil, err
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != hitlv1.GroupVersion.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		internal := &apiextensions.JSONSchemaProps{}
		if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, internal, nil); err != nil {
			return nil, err
		}
		s, err := structuralschema.NewStructural(internal)
		if err != nil {
			return nil, err
		}
		validator := apiextensionscel.NewValidator(s, true, fzCELPerCallLimit)
		if validator == nil {
			return nil, errors.New("the CRD has no CEL rules")
		}
		return &fzCRD{schema: s, validator: validator}, nil
	}
	return nil, fmt.Errorf("the CRD has no schema for %s", hitlv1.GroupVersion.Version)
})

type fzCRD struct {
	schema    *structuralschema.Structural
	validator *apiextensionscel.Validator
}

// fzAskedByRule evaluates the UserQuestion CRD's rules on an update of
// old to q, and reports whether the rule on spec.askedBy refuses it, with
// its message.
func fzAskedByRule(q, old *hitlv1.UserQuestion) (refused bool, msg string, err error) {
	crd, err := fzQuestionCRD()
	if err != nil {
		return false, "", err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(q)
	if err != nil {
		return false, "", err
	}
	oldObj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		return false, "", err
	}
	errs, remaining := crd.validator.Validate(context.Background(), nil, crd.schema, obj, oldObj, fzCELCostBudget)
	if remaining < 0 {
		return false, "", fmt.Errorf("out of CEL cost budget: %v", errs)
	}
	for _, e := range errs {
		if e.Field == "spec.askedBy" {
			return true, e.Detail, nil
		}
	}
	return false, "", nil
}

// fzCheckClaimDefaults: the defaulted claim's spec.holder is exactly the
// requesting user, on every create and update, whatever the client sent
// and whoever held the claim before (refusing a renewal by another than
// the old holder, NOT_OWNER, and a claim without the answer grant,
// FORBIDDEN, is the claim-identity policy's: no Go code decides them);
// the labels hitl.dev/question and hitl.dev/agent are spec.questionRef.name
// and spec.agent, over the client's; nothing else changes.
func fzCheckClaimDefaults(c fzCase, patched []byte, fail func(string, ...any)) {
	orig, _ := fzDecodes(c.req.Object.Raw, &hitlv1.QuestionClaim{})
	got, ok := fzDecodes(patched, &hitlv1.QuestionClaim{})
	if !ok {
		fail("the defaulted claim does not decode: %.300s", patched)
	}
	u := c.req.UserInfo
	user := &hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: fzNonEmpty(u.Groups)}
	if got.Spec.Holder == nil {
		fail("spec.holder is not stamped")
	}
	got.Spec.Holder.Groups = fzNonEmpty(got.Spec.Holder.Groups)
	if by := got.Spec.Holder; !reflect.DeepEqual(by, user) {
		fail("spec.holder is %q %q %v, the requesting user is %q %q %v",
			fzShort(by.Username), fzShort(by.UID), by.Groups, fzShort(user.Username), fzShort(user.UID), user.Groups)
	}
	want := orig.DeepCopy()
	want.Spec.Holder = user
	labelled := want.DeepCopy()
	if labelled.Labels == nil {
		labelled.Labels = map[string]string{}
	}
	labelled.Labels[hitlv1.QuestionLabel] = orig.Spec.QuestionRef.Name
	labelled.Labels[hitlv1.AgentLabel] = orig.Spec.Agent
	if orig.Spec.QuestionRef.Name != "" && orig.Spec.Agent != "" ||
		reflect.DeepEqual(got.Labels, labelled.Labels) {
		// A claim naming no question or no agent (which the schema
		// refuses) may keep its labels or take the empty values.
		want = labelled
	}
	if !reflect.DeepEqual(got, want) {
		fail("the defaulted claim is\n%+v\nwant\n%+v", got, want)
	}
}

// fzCheckReplyDefaults: the defaulted reply's spec.answeredBy is the
// requesting user; when the question exists, the question label names it,
// the agent label is its agent unless the client set one (a conflicting
// label is kept, for the validators and the controller to refuse with
// AGENT_MISMATCH), and it owns the reply; nothing else changes.
func fzCheckReplyDefaults(c fzCase, patched []byte, fail func(string, ...any)) {
	orig, _ := fzDecodes(c.req.Object.Raw, &hitlv1.QuestionReply{})
	got, ok := fzDecodes(patched, &hitlv1.QuestionReply{})
	if !ok {
		fail("the defaulted reply does not decode: %.300s", patched)
	}
	u := c.req.UserInfo
	user := &hitlv1.UserInfo{Username: u.Username, UID: u.UID, Groups: fzNonEmpty(u.Groups)}
	if got.Spec.AnsweredBy == nil {
		fail("spec.answeredBy is not stamped")
	}
	if by := *got.Spec.AnsweredBy; by.Username != user.Username || by.UID != user.UID || !reflect.DeepEqual(fzNonEmpty(by.Groups), user.Groups) {
		fail("spec.answeredBy is %q %q %v, the request's user is %q %q %v",
			fzShort(by.Username), fzShort(by.UID), by.Groups, fzShort(user.Username), fzShort(user.UID), user.Groups)
	}
	want := orig.DeepCopy()
	want.Spec.AnsweredBy = user
	got.Spec.AnsweredBy.Groups = fzNonEmpty(got.Spec.AnsweredBy.Groups)
	if q := c.question; q != nil && orig.Namespace == q.Namespace && orig.Spec.QuestionRef.Name == q.Name {
		if want.Labels == nil {
			want.Labels = map[string]string{}
		}
		if _, set := orig.Labels[hitlv1.AgentLabel]; !set {
			want.Labels[hitlv1.AgentLabel] = q.Spec.Agent
		}
		want.Labels[hitlv1.QuestionLabel] = q.Name
		owned := false
		for _, o := range orig.OwnerReferences {
			owned = owned || o.UID == q.UID
		}
		if !owned {
			want.OwnerReferences = append(want.OwnerReferences, metav1.OwnerReference{
				APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion", Name: q.Name, UID: q.UID,
			})
		}
	}
	if !reflect.DeepEqual(got, want) {
		fail("the defaulted reply is\n%+v\nwant\n%+v", got, want)
	}
}

// fzCheckReplyVerdict checks the reply validator's decision against the
// feedback checks it gives, in the order it makes them: a missing question
// (NOT_ANSWERABLE), a user who may not answer the question's agent
// (FORBIDDEN), an agent label that names another agent (AGENT_MISMATCH), a
// spec.questionRef.uid that is not the live question's (NOT_ANSWERABLE), a
// reply from the question's spec.askedBy to an Approval or PlanReview
// question (SELF_APPROVAL), a Settled, Cancelled or cancelling question
// (NOT_ANSWERABLE), a queued reply (REPLY_QUEUED), and a batch
// ValidateAnswers refuses (BAD_ANSWER). A denial gives the first rule the
// request breaks, and names its field in the message and in its one
// cause; an allowed reply breaks none.
func fzCheckReplyVerdict(c fzCase, code hitlv1.ErrorCode, resp admission.Response, sars []fzSAR, fail func(string, ...any)) string {
	allowed := resp.Allowed
	if c.req.Operation != admissionv1.Create {
		if !allowed {
			fail("%s is denied with %s", c.req.Operation, code)
		}
		return "allowed"
	}
	r, _ := fzDecodes(c.req.Object.Raw, &hitlv1.QuestionReply{})
	var q *hitlv1.UserQuestion
	if w := c.question; w != nil && r.Namespace == w.Namespace && r.Spec.QuestionRef.Name == w.Name {
		q = w
	}
	exists := q != nil
	mayAnswer := exists && !c.denied[hitlv1.VerbAnswer+"/"+q.Spec.Agent]
	label, labelled := r.Labels[hitlv1.AgentLabel]
	labelOK := exists && (!labelled || label == q.Spec.Agent)
	refUID := r.Spec.QuestionRef.UID
	uidOK := exists && (refUID == "" || refUID == q.UID)
	self := exists && fzNeedsOtherApprover(q) && fzSameUser(c.req.UserInfo, q.Spec.AskedBy)
	answerable := exists && !q.Status.State.Terminal() && !q.Spec.Cancelled
	queued := exists && q.Status.QueuedReply != nil
	var batchErr error = errors.New("no question")
	if exists {
		batchErr = validation.ValidateAnswers(q.Spec.Questions, r.Spec.Answers)
	}
	var wantCode hitlv1.ErrorCode
	var wantField string
	switch {
	case !exists:
		wantCode, wantField = hitlv1.CodeNotAnswerable, "spec.questionRef.name"
	case !mayAnswer:
		wantCode, wantField = hitlv1.CodeForbidden, "spec.answeredBy"
	case !labelOK:
		wantCode, wantField = hitlv1.CodeAgentMismatch, "metadata.labels"
	case !uidOK:
		wantCode, wantField = hitlv1.CodeNotAnswerable, "spec.questionRef.uid"
	case self:
		wantCode, wantField = hitlv1.CodeSelfApproval, "spec.answeredBy"
	case !answerable:
		wantCode, wantField = hitlv1.CodeNotAnswerable, "spec.questionRef.name"
	case queued:
		wantCode, wantField = hitlv1.CodeReplyQueued, "spec.questionRef.name"
	case batchErr != nil:
		wantCode, wantField = hitlv1.CodeBadAnswer, "spec.answers"
	}
	for _, s := range sars {
		if !exists || s.spec.ResourceAttributes.Verb != hitlv1.VerbAnswer || s.spec.ResourceAttributes.Name != q.Spec.Agent || s.spec.ResourceAttributes.Namespace != q.Namespace {
			fail("a SubjectAccessReview for %+v, not for answering agent %v", s.spec.ResourceAttributes, q)
		}
	}
	if exists && !c.injected() && len(sars) != 1 {
		fail("%d SubjectAccessReviews for a reply to an existing question, want 1 (for its agent)", len(sars))
	}
	facts := func() string {
		var askedBy any = "none"
		if exists && q.Spec.AskedBy != nil {
			askedBy = fmt.Sprintf("%q uid %q", fzShort(q.Spec.AskedBy.Username), fzShort(q.Spec.AskedBy.UID))
		}
		return fmt.Sprintf("question exists %v, may answer %v, label %q (set %v), questionRef.uid %q, asked by %v, requester uid %q, needs another approver %v, answerable %v, queued %v, batch %v",
			exists, mayAnswer, fzShort(label), labelled, fzShort(string(refUID)), askedBy, fzShort(c.req.UserInfo.UID), exists && fzNeedsOtherApprover(q), answerable, queued, batchErr)
	}
	switch {
	case allowed && wantCode != "":
		fail("allowed a reply that SPEC refuses with %s: %s", wantCode, facts())
	case !allowed && wantCode == "" && !c.injected():
		fail("denied (%s) a reply that SPEC allows: %s", code, facts())
	case code != "" && code != wantCode:
		fail("denied with %s, but the first rule the reply breaks is %s (%s)", code, wantCode, facts())
	case code != "":
		// The denial names the field of the rule it breaks: in its one
		// cause, and at the end of its message.
		var causes []metav1.StatusCause
		if d := resp.Result.Details; d != nil {
			causes = d.Causes
		}
		if len(causes) != 1 {
			fail("a %s denial with %d causes, want 1: %+v", code, len(causes), causes)
		}
		f := causes[0].Field
		if f != wantField && (wantCode != hitlv1.CodeBadAnswer || !strings.HasPrefix(f, wantField)) {
			fail("a %s denial names field %q, want %q", code, f, wantField)
		}
		if !strings.Contains(resp.Result.Message, "("+f+")") || !strings.Contains(causes[0].Message, string(code)+": ") {
			fail("a %s denial whose message %q or cause %q does not name field %s with the code", code, fzShort(resp.Result.Message), fzShort(causes[0].Message), f)
		}
	}
	return fzOutcome(allowed, code)
}

// fzSameUser is the tenancy guide's "the asker": the same username, and the
// same UID when both the stamp and the request carry one. An empty
// username names nobody (the API server always gives one, system:anonymous
// at least), so an empty stamp matches no requester.
func fzSameUser(u authenticationv1.UserInfo, stamp *hitlv1.UserInfo) bool {
	if stamp == nil || u.Username == "" || u.Username != stamp.Username {
		return false
	}
	return u.UID == "" || stamp.UID == "" || u.UID == stamp.UID
}

// fzNeedsOtherApprover: the question holds an intent of type Approval or
// PlanReview (exactly these names), which its asker may not answer.
func fzNeedsOtherApprover(q *hitlv1.UserQuestion) bool {
	for _, x := range q.Spec.Questions {
		if x.Intent != nil && (x.Intent.Type == "Approval" || x.Intent.Type == "PlanReview") {
			return true
		}
	}
	return false
}

// fzCoded reports whether a message starts with a code of SPEC §3.
func fzCoded(msg string) bool {
	for _, cd := range fzSpecCodes {
		if strings.HasPrefix(msg, string(cd)+": ") {
			return true
		}
	}
	return false
}

func fzOutcome(allowed bool, code hitlv1.ErrorCode) string {
	if allowed {
		return "allowed"
	}
	return string(code)
}

func fzNonEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func fzNonEmptyMap(m map[string]authorizationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(m) == 0 {
		return nil
	}
	return m
}

func fzShort(s string) string {
	if len(s) > 80 {
		return s[:80] + fmt.Sprintf("...(%d bytes)", len(s))
	}
	return s
}

// fzSeed is a seed of the corpus: the control bytes (see
// decodeWebhookCase), the fuzz string, the raw object and old object, and
// the outcome it must have.
type fzSeed struct {
	name     string
	ctl      []byte
	text     string
	obj, old []byte
	want     string
}

// Control bytes of the seeds. Offsets into ctl:
const (
	fzAtHandler = iota
	fzAtOp
	fzAtUser
	fzAtDeny
	fzAtFailure
	fzAtState
	fzAtShape
	fzAtAbsent
	fzAtObjSource
	fzAtOldSource
	fzAtNamespace
	fzAtMeta
	fzAtGen // eight generator bytes follow, then fzExt's (fzAtAskedBy...)
)

// fzCtl is a control input: handler h, then the given offset/value pairs
// over zeros.
func fzCtl(h int, offsetValue ...int) []byte {
	ctl := make([]byte, fzAtEnd)
	ctl[fzAtHandler] = byte(h)
	for i := 0; i+1 < len(offsetValue); i += 2 {
		ctl[offsetValue[i]] = byte(offsetValue[i+1])
	}
	return ctl
}

var fzSeeds = []fzSeed{
	// Replies, defaulted.
	{name: "reply stamped", ctl: fzCtl(fzReplyMutate), want: "patched"},
	{name: "reply claiming mallory", ctl: fzCtl(fzReplyMutate, fzAtGen+2, 2), want: "patched"},
	{name: "reply claiming mallory with a key of another case", ctl: fzCtl(fzReplyMutate, fzAtGen+2, 6), want: "patched"},
	{name: "reply claiming mallory with an unknown field", ctl: fzCtl(fzReplyMutate, fzAtGen+2, 7), want: "patched"},
	{name: "reply with two specs", ctl: fzCtl(fzReplyMutate, fzAtGen+6, 15), want: "patched"},
	{name: "reply already stamped and owned", ctl: fzCtl(fzReplyMutate, fzAtGen+2, 3, fzAtGen+4, 1), want: "patched"},
	{name: "reply naming another agent keeps its label", ctl: fzCtl(fzReplyMutate, fzAtGen+3, 1), want: "patched"},
	{name: "reply naming an empty agent keeps its label", ctl: fzCtl(fzReplyMutate, fzAtGen+3, 5), want: "patched"},
	{name: "reply stamped, labelled and owned as kubectl hitl sends it", ctl: fzCtl(fzReplyMutate, fzAtGen+3, 7, fzAtGen+2, 3, fzAtGen+4, 1), want: "allowed"},
	{name: "reply by an anonymous user", ctl: fzCtl(fzReplyMutate, fzAtUser, 10), want: "patched"},
	{name: "reply by the agent's namesake of another namespace", ctl: fzCtl(fzReplyMutate, fzAtUser, 3), want: "patched"},
	{name: "reply to a missing question", ctl: fzCtl(fzReplyMutate, fzAtGen, 6), want: "patched"},
	{name: "reply naming a question by a path", ctl: fzCtl(fzReplyMutate, fzAtGen, 8), want: "patched"},
	{name: "reply naming no question", ctl: fzCtl(fzReplyMutate, fzAtGen, 7), want: "patched"},
	{name: "reply naming the question ..", ctl: fzCtl(fzReplyMutate, fzAtGen, 9), want: "patched"},
	{name: "reply defaulted on deletion", ctl: fzCtl(fzReplyMutate, fzAtOp, 4), want: "allowed"},
	{name: "reply defaulted, cache failing", ctl: fzCtl(fzReplyMutate, fzAtFailure, 14), want: "500 injected"},
	{name: "reply defaulted, question missing, API reader failing", ctl: fzCtl(fzReplyMutate, fzAtAbsent, 7, fzAtFailure, 15), want: "500 injected"},
	{name: "reply of garbage bytes", ctl: fzCtl(fzReplyMutate, fzAtObjSource, 7), obj: []byte("\x00{not json"), want: "400"},
	{name: "reply that is a question", ctl: fzCtl(fzReplyMutate, fzAtObjSource, 6), want: "400"},
	{name: "reply that is a Pod", ctl: fzCtl(fzReplyMutate, fzAtGen+6, 10), want: "400"},

	// Replies, validated (feedback).
	{name: "reply valid", ctl: fzCtl(fzReplyValidate), want: "allowed"},
	{name: "reply valid, late", ctl: fzCtl(fzReplyValidate, fzAtState, 2), want: "allowed"},
	{name: "reply valid, labelled with its question's agent", ctl: fzCtl(fzReplyValidate, fzAtGen+3, 7), want: "allowed"},
	{name: "reply valid, from a ServiceAccount with the answer verb", ctl: fzCtl(fzReplyValidate, fzAtUser, 2), want: "allowed"},
	{name: "reply without the answer verb", ctl: fzCtl(fzReplyValidate, fzAtDeny, 2), want: string(hitlv1.CodeForbidden)},
	{name: "reply naming another agent", ctl: fzCtl(fzReplyValidate, fzAtGen+3, 1), want: string(hitlv1.CodeAgentMismatch)},
	{name: "reply naming another agent it may answer", ctl: fzCtl(fzReplyValidate, fzAtGen+3, 3, fzAtDeny, 1), want: string(hitlv1.CodeAgentMismatch)},
	{name: "reply naming an empty agent", ctl: fzCtl(fzReplyValidate, fzAtGen+3, 5), want: string(hitlv1.CodeAgentMismatch)},
	{name: "reply naming another agent, without the answer verb", ctl: fzCtl(fzReplyValidate, fzAtGen+3, 1, fzAtDeny, 2), want: string(hitlv1.CodeForbidden)},
	{name: "reply naming another agent, to a settled question", ctl: fzCtl(fzReplyValidate, fzAtGen+3, 1, fzAtState, 3), want: string(hitlv1.CodeAgentMismatch)},
	{name: "reply to a settled question", ctl: fzCtl(fzReplyValidate, fzAtState, 3), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply to a cancelled question", ctl: fzCtl(fzReplyValidate, fzAtState, 4), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply to a question being cancelled", ctl: fzCtl(fzReplyValidate, fzAtState, 6), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply to a question with a queued reply", ctl: fzCtl(fzReplyValidate, fzAtState, 7), want: string(hitlv1.CodeReplyQueued)},
	{name: "reply to a missing question", ctl: fzCtl(fzReplyValidate, fzAtAbsent, 7), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply naming a question by a path", ctl: fzCtl(fzReplyValidate, fzAtGen, 8), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply skipping everything", ctl: fzCtl(fzReplyValidate, fzAtGen+1, 1), want: string(hitlv1.CodeBadAnswer)},
	{name: "reply with a stray id", ctl: fzCtl(fzReplyValidate, fzAtGen+1, 2), want: string(hitlv1.CodeBadAnswer)},
	{name: "reply to another agent's question", ctl: fzCtl(fzReplyValidate, fzAtShape, 1, fzAtDeny, 8), want: string(hitlv1.CodeForbidden)},
	{name: "reply to another agent's question, labelled with it", ctl: fzCtl(fzReplyValidate, fzAtShape, 1, fzAtGen+3, 4), want: string(hitlv1.CodeAgentMismatch)},
	{name: "reply, SubjectAccessReview failing", ctl: fzCtl(fzReplyValidate, fzAtFailure, 13), want: "500 injected"},
	{name: "reply, cache failing", ctl: fzCtl(fzReplyValidate, fzAtFailure, 14), want: "500 injected"},
	{name: "reply deleted", ctl: fzCtl(fzReplyValidate, fzAtOp, 4), want: "allowed"},
	{name: "reply updated", ctl: fzCtl(fzReplyValidate, fzAtOp, 3, fzAtGen+3, 1), want: "allowed"},
	{name: "reply deleted, old object garbage", ctl: fzCtl(fzReplyValidate, fzAtOp, 4, fzAtOldSource, 1), old: []byte("[]"), want: "400"},
	{name: "reply, unknown operation", ctl: fzCtl(fzReplyValidate, fzAtOp, 7), want: "400"},
	{name: "reply, huge name and namespace", ctl: fzCtl(fzReplyValidate, fzAtMeta, 6, fzAtGen, 13), text: "ns", want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply in a v1beta1 review", ctl: fzCtl(fzReplyValidate, fzAtMeta, 3), want: "allowed"},
	{name: "reply connect", ctl: fzCtl(fzReplyValidate, fzAtOp, 5, fzAtObjSource, 7), want: "allowed"},

	// Questions, defaulted. Asking is refused by the validating policies,
	// not by a webhook: whatever the asker or the ask, the defaulter only
	// labels and stamps.
	{name: "question labelled and stamped", ctl: fzCtl(fzQuestionMutate), want: "patched"},
	{name: "question already labelled, update", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtGen+1, 3), want: "allowed"},
	{name: "question unlabelled, update", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtGen+1, 7), want: "patched"},
	{name: "question with a conflicting label", ctl: fzCtl(fzQuestionMutate, fzAtGen+1, 4), want: "patched"},
	{name: "question with an empty agent label", ctl: fzCtl(fzQuestionMutate, fzAtGen+1, 5, fzAtGen+5, 2), want: "patched"},
	{name: "question with askedAt", ctl: fzCtl(fzQuestionMutate, fzAtGen+5, 2), want: "patched"},
	{name: "question labelled, with askedAt", ctl: fzCtl(fzQuestionMutate, fzAtGen+1, 3, fzAtGen+5, 2), want: "patched"},
	{name: "question with a bad askedAt", ctl: fzCtl(fzQuestionMutate, fzAtGen+5, 3), want: "400"},
	{name: "question with a spec that is a string", ctl: fzCtl(fzQuestionMutate, fzAtGen+6, 12), text: "spec", want: "400"},
	{name: "question asked by the agent's namesake of another namespace", ctl: fzCtl(fzQuestionMutate, fzAtUser, 3), want: "patched"},
	{name: "question asked by a ServiceAccount with a path name", ctl: fzCtl(fzQuestionMutate, fzAtUser, 5), want: "patched"},
	{name: "question from a subagent", ctl: fzCtl(fzQuestionMutate, fzAtGen+2, 2), want: "patched"},
	{name: "question without questions", ctl: fzCtl(fzQuestionMutate, fzAtGen+3, 4), want: "patched"},
	{name: "question without an agent", ctl: fzCtl(fzQuestionMutate, fzAtGen, 3), want: "patched"},
	{name: "question, timeout above any maximum", ctl: fzCtl(fzQuestionMutate, fzAtGen+4, 5), want: "patched"},
	{name: "question, unparsable timeout", ctl: fzCtl(fzQuestionMutate, fzAtGen+4, 8), want: "400"},
	{name: "question deleted", ctl: fzCtl(fzQuestionMutate, fzAtOp, 4), want: "allowed"},
	{name: "question of raw JSON", ctl: fzCtl(fzQuestionMutate, fzAtObjSource, 7),
		obj: []byte(`{"apiVersion":"hitl.dev/v1alpha1","kind":"UserQuestion","metadata":{"namespace":"ns","labels":{"hitl.dev/agent":"coder"}},"spec":{"agent":"coder","questions":[{"id":"a","question":"?"}],"timeout":"1ms","askedAt":"2026-01-02T03:04:05.000001Z"}}`), want: "patched"},
	{name: "question of a number", ctl: fzCtl(fzQuestionMutate, fzAtObjSource, 7), obj: []byte("12"), want: "400"},
	{name: "question of null", ctl: fzCtl(fzQuestionMutate, fzAtObjSource, 7), obj: []byte("null"), want: "400"},
	{name: "question of bytes that are not JSON", ctl: fzCtl(fzQuestionMutate, fzAtObjSource, 7), obj: []byte{0xff, 0xfe}, want: "400"},
	{name: "question in a v1beta1 review", ctl: fzCtl(fzQuestionMutate, fzAtMeta, 3), want: "patched"},
	{name: "question without request UID", ctl: fzCtl(fzQuestionMutate, fzAtMeta, 4), want: "patched"},
	{name: "question sent as a Pod", ctl: fzCtl(fzQuestionMutate, fzAtMeta, 5), want: "patched"},
	// Replies naming their question by UID (feedback): a reply made for
	// another question of the same name is NOT_ANSWERABLE, after FORBIDDEN
	// and AGENT_MISMATCH.
	{name: "reply naming the live question's UID", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 1), want: "allowed"},
	{name: "reply naming an earlier question's UID", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 2), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply naming the question's UID in upper case", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 5), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply naming the question's UID with a trailing space", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 6), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply naming a huge UID", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 4), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply naming the fuzz text as UID, which is the question's", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 3), text: string(fzQuestionUID), want: "allowed"},
	{name: "reply naming a numeric UID", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 7), want: "400"},
	{name: "reply naming a null UID", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 8), want: "allowed"},
	{name: "reply naming an empty UID", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 9), want: "allowed"},
	{name: "reply naming an earlier UID, without the answer verb", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 2, fzAtDeny, 2), want: string(hitlv1.CodeForbidden)},
	{name: "reply naming an earlier UID and another agent", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 2, fzAtGen+3, 1), want: string(hitlv1.CodeAgentMismatch)},
	{name: "reply naming an earlier UID, by the asker of an Approval", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 2, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply naming an earlier UID, to a settled question", ctl: fzCtl(fzReplyValidate, fzAtRefUID, 2, fzAtState, 3), want: string(hitlv1.CodeNotAnswerable)},
	{name: "reply defaulted, naming an earlier UID", ctl: fzCtl(fzReplyMutate, fzAtRefUID, 2), want: "patched"},

	// Self-approval (feedback): the question's asker (same username, same
	// UID when both carry one) may not answer an Approval or PlanReview
	// question, whatever its grants; the check comes after FORBIDDEN,
	// AGENT_MISMATCH and the UID, before the question's state and the batch.
	{name: "asker approving its Approval question", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker approving its PlanReview question", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 1, fzAtGen+1, 9), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker answering its Approval question of the usual shapes", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtShape, 6, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker answering an Approval beside a plain question", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 2), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker answering a plain question beside a PlanReview", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 5), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker answering its plain question", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1), want: "allowed"},
	{name: "asker answering its Poll", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 3), want: "allowed"},
	{name: "asker answering an intent typed approval in lower case", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 4), want: "allowed"},
	{name: "asker answering an intent with an approval but no type", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 6), want: "allowed"},
	{name: "asker's username with another UID approving", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 2, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "asker's username, stamped without a UID, approving", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 3, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker in other groups approving", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 5, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "asker's username in upper case approving", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 7, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "asker's username with a trailing space approving", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 9, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "alice approving what alice asked", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 8, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "the agent's ServiceAccount approving its own Approval", ctl: fzCtl(fzReplyValidate, fzAtUser, 1, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "a person approving the agent's Approval", ctl: fzCtl(fzReplyValidate, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "a person approving the agent's PlanReview", ctl: fzCtl(fzReplyValidate, fzAtIntent, 1, fzAtGen+1, 9), want: "allowed"},
	{name: "approving an Approval asked before askedBy existed", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 4, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "a user without a name approving a question with an empty stamp", ctl: fzCtl(fzReplyValidate, fzAtUser, 10, fzAtAskedBy, 6, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "a user without a name approving what it asked", ctl: fzCtl(fzReplyValidate, fzAtUser, 10, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 8), want: "allowed"},
	{name: "system:anonymous approving what it asked", ctl: fzCtl(fzReplyValidate, fzAtUser, 9, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "a user without a UID approving what it asked with one", ctl: fzCtl(fzReplyValidate, fzAtUser, 13, fzAtAskedBy, 2, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "a huge user approving what it asked", ctl: fzCtl(fzReplyValidate, fzAtUser, 12, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 8), want: string(hitlv1.CodeSelfApproval)},
	{name: "self-approval without the answer verb", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtDeny, 2), want: string(hitlv1.CodeForbidden)},
	{name: "self-approval naming another agent", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+3, 1), want: string(hitlv1.CodeAgentMismatch)},
	{name: "self-approval naming the live UID", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtRefUID, 1), want: string(hitlv1.CodeSelfApproval)},
	{name: "self-approval of a settled question", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtState, 3), want: string(hitlv1.CodeSelfApproval)},
	{name: "self-approval with a reply queued", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtState, 7), want: string(hitlv1.CodeSelfApproval)},
	{name: "self-approval with a bad batch", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 1), want: string(hitlv1.CodeSelfApproval)},
	{name: "self-approval claiming to be mallory", ctl: fzCtl(fzReplyValidate, fzAtAskedBy, 1, fzAtIntent, 7, fzAtGen+1, 8, fzAtGen+2, 2), want: string(hitlv1.CodeSelfApproval)},
	{name: "self-approval deleted", ctl: fzCtl(fzReplyValidate, fzAtOp, 4, fzAtAskedBy, 1, fzAtIntent, 7), want: "allowed"},

	// Questions' askedBy: stamped from the requester on creation whatever
	// the client sends; on update kept when left out, and the CRD refuses
	// (NOT_OWNER) an update that changes or drops a stamped one.
	{name: "question forging mallory as its asker", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 1), want: "patched"},
	{name: "question claiming its requester as its asker", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 2, fzAtGen+5, 2, fzAtGen+1, 3), want: "allowed"},
	{name: "question claiming the agent as its asker", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 3), want: "patched"},
	{name: "question claiming an empty asker", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 4), want: "patched"},
	{name: "question claiming a null asker", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 5), want: "patched"},
	{name: "question claiming an asker with keys of another case", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 6), want: "patched"},
	{name: "question claiming an asker that is a string", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 7), want: "400"},
	{name: "question claiming an asker with an unknown field", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 9), want: "patched"},
	{name: "question claiming a huge asker", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 11), want: "patched"},
	{name: "question forging mallory, asked by a huge user", ctl: fzCtl(fzQuestionMutate, fzAtClaimed, 1, fzAtUser, 12), want: "patched"},
	{name: "question update leaving askedBy out keeps the stamp", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtGen+1, 3), want: "patched"},
	{name: "question update sending the stamp back", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 3, fzAtGen+1, 3), want: "allowed"},
	{name: "question update changing askedBy to mallory", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 1), want: fzOutcomeCRDRefused},
	{name: "question update changing askedBy to the requester", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 2, fzAtGen+1, 3), want: fzOutcomeCRDRefused},
	{name: "question update emptying askedBy", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 4), want: fzOutcomeCRDRefused},
	{name: "question update changing askedBy's UID", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 3, fzAtClaimed, 8, fzAtGen+1, 3), want: fzOutcomeCRDRefused},
	{name: "question update sending a huge askedBy", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 11), want: fzOutcomeCRDRefused},
	{name: "question update sending a null askedBy keeps the stamp", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 5, fzAtClaimed, 5, fzAtGen+1, 3), want: "patched"},
	{name: "question update sending askedBy keys of another case, an empty askedBy", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 6, fzAtGen+1, 3), want: fzOutcomeCRDRefused},
	{name: "question update of another question, askedBy sent back", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldSource, 3, fzAtOldStamp, 1, fzAtClaimed, 3, fzAtGen+1, 3), want: "allowed"},
	{name: "question update, stored question of garbage", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldSource, 1, fzAtClaimed, 1), old: []byte("[]"), want: "patched"},
	{name: "question without askedBy, update leaving it out", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 2, fzAtGen+1, 3), want: "allowed"},
	{name: "question with a null askedBy, update leaving it out", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 4, fzAtGen+1, 3), want: "allowed"},
	{name: "question without askedBy, update forging mallory", ctl: fzCtl(fzQuestionMutate, fzAtOp, 3, fzAtOldStamp, 2, fzAtClaimed, 1, fzAtGen+1, 3), want: fzOutcomeCRDRefused},

	// Claims, defaulted: spec.holder is the requester on every create and
	// update, whatever the client sends and whoever held it (refusing
	// those is the claim-identity and claim-owner policies'), and the
	// labels follow the spec.
	{name: "claim stamped and labelled", ctl: fzCtl(fzClaimMutate), want: "patched"},
	{name: "claim as the defaulter leaves it", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 2, fzAtGen+3, 1), want: "allowed"},
	{name: "claim forging mallory as its holder", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 1, fzAtGen+3, 1), want: "patched"},
	{name: "claim forging the agent as its holder", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 3), want: "patched"},
	{name: "claim with an empty holder", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 4), want: "patched"},
	{name: "claim with a null holder", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 5), want: "patched"},
	{name: "claim with holder keys of another case", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 6), want: "patched"},
	{name: "claim with a holder that is a string", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 7), want: "400"},
	{name: "claim with the requester's name and another UID", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 8, fzAtGen+3, 1), want: "patched"},
	{name: "claim with a holder with an unknown field", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 9), want: "patched"},
	{name: "claim with a holder of the fuzz text", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 10), text: "system:serviceaccount:ns:coder", want: "patched"},
	{name: "claim with a huge holder", ctl: fzCtl(fzClaimMutate, fzAtClaimed, 11), want: "patched"},
	{name: "claim by an anonymous user", ctl: fzCtl(fzClaimMutate, fzAtUser, 9), want: "patched"},
	{name: "claim by a user without a name", ctl: fzCtl(fzClaimMutate, fzAtUser, 10), want: "patched"},
	{name: "claim by a huge user, forging mallory", ctl: fzCtl(fzClaimMutate, fzAtUser, 12, fzAtClaimed, 1), want: "patched"},
	{name: "claim by a user with extra", ctl: fzCtl(fzClaimMutate, fzAtUser, 13), want: "patched"},
	{name: "claim renewed by another than its holder, re-stamped", ctl: fzCtl(fzClaimMutate, fzAtOp, 3, fzAtOldStamp, 1, fzAtClaimed, 3, fzAtGen+3, 1), want: "patched"},
	{name: "claim renewed by its holder", ctl: fzCtl(fzClaimMutate, fzAtOp, 3, fzAtOldStamp, 3, fzAtClaimed, 2, fzAtGen+3, 1), want: "allowed"},
	{name: "claim renewed without a holder", ctl: fzCtl(fzClaimMutate, fzAtOp, 3, fzAtOldStamp, 2, fzAtGen+3, 1), want: "patched"},
	{name: "claim released", ctl: fzCtl(fzClaimMutate, fzAtOp, 4, fzAtOldStamp, 1), want: "allowed"},
	{name: "claim released, old object garbage", ctl: fzCtl(fzClaimMutate, fzAtOp, 4, fzAtOldSource, 1), old: []byte("[]"), want: "allowed"},
	{name: "claim of another agent", ctl: fzCtl(fzClaimMutate, fzAtGen+1, 2), want: "patched"},
	{name: "claim of an agent of the fuzz text", ctl: fzCtl(fzClaimMutate, fzAtGen+0, 4, fzAtGen+1, 4), text: "a/b\x00\xff", want: "patched"},
	{name: "claim of a huge agent and question", ctl: fzCtl(fzClaimMutate, fzAtGen+0, 5, fzAtGen+1, 5), want: "patched"},
	{name: "claim naming no agent", ctl: fzCtl(fzClaimMutate, fzAtGen+1, 3), want: "patched"},
	{name: "claim naming no question, labelled empty", ctl: fzCtl(fzClaimMutate, fzAtGen+0, 3, fzAtGen+3, 4), want: "patched"},
	{name: "claim with conflicting labels", ctl: fzCtl(fzClaimMutate, fzAtGen+3, 3), want: "patched"},
	{name: "claim naming an earlier question's UID", ctl: fzCtl(fzClaimMutate, fzAtGen+0, 2), want: "patched"},
	{name: "claim for zero seconds", ctl: fzCtl(fzClaimMutate, fzAtGen+4, 1), want: "patched"},
	{name: "claim for a duration that overflows", ctl: fzCtl(fzClaimMutate, fzAtGen+4, 4), want: "400"},
	{name: "claim for a duration that is a string", ctl: fzCtl(fzClaimMutate, fzAtGen+4, 5), want: "400"},
	{name: "claim renewed at a time that is not one", ctl: fzCtl(fzClaimMutate, fzAtGen+5, 2), want: "400"},
	{name: "claim with a null questionRef", ctl: fzCtl(fzClaimMutate, fzAtGen+2, 1), want: "patched"},
	{name: "claim with a questionRef that is a string", ctl: fzCtl(fzClaimMutate, fzAtGen+2, 2), want: "400"},
	{name: "claim with a spec that is a string", ctl: fzCtl(fzClaimMutate, fzAtGen+6, 12), text: "spec", want: "400"},
	{name: "claim with two specs", ctl: fzCtl(fzClaimMutate, fzAtGen+6, 15), want: "patched"},
	{name: "claim that is a reply", ctl: fzCtl(fzClaimMutate, fzAtObjSource, 6), want: "400"},
	{name: "claim that is a Pod", ctl: fzCtl(fzClaimMutate, fzAtGen+6, 10), want: "400"},
	{name: "claim of garbage bytes", ctl: fzCtl(fzClaimMutate, fzAtObjSource, 7), obj: []byte("\x00{not json"), want: "400"},
	{name: "claim in a v1beta1 review", ctl: fzCtl(fzClaimMutate, fzAtMeta, 3), want: "patched"},
	{name: "claim with a huge name and namespace", ctl: fzCtl(fzClaimMutate, fzAtMeta, 6), want: "patched"},
	{name: "claim, connect", ctl: fzCtl(fzClaimMutate, fzAtOp, 5), want: "patched"},
	{name: "claim body of an empty review", ctl: fzCtl(fzClaimMutate, fzAtMeta, 7), obj: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), want: "any body"},

	{name: "body of garbage", ctl: fzCtl(fzReplyMutate, fzAtMeta, 7), obj: []byte("{\"request\":"), want: "any body"},
	{name: "body of an empty review", ctl: fzCtl(fzReplyValidate, fzAtMeta, 7), obj: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), want: "any body"},
	{name: "question body of an empty review", ctl: fzCtl(fzQuestionMutate, fzAtMeta, 7), obj: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`), want: "any body"},
}

// FuzzWebhookHandlers feeds the four admission handlers (the question
// defaulter, the reply defaulter and feedback validator, and the claim
// defaulter), built the
// way ctrl.NewWebhookManagedBy builds them and served over HTTP as the
// webhook server serves them, hostile AdmissionReviews: any operation, any
// user, arbitrary JSON or generated objects with wrong kinds, missing or
// extra fields, forged identities, conflicting agent labels and huge
// strings, as the object and the old object, v1 and v1beta1 reviews, and
// bodies of arbitrary bytes. The reply's question is in a fake client (with
// ServiceAccounts, one annotated as the retired rule once read, that no
// handler may need), the API reader refuses the names client-go's REST
// client refuses, a SubjectAccessReview is answered from the fuzz input,
// and the input may make any of these clients fail.
//
// Properties, for every request:
//   - the handler does not panic (panics are not recovered here) and
//     answers with an AdmissionReview response for the request's UID (for
//     a body of arbitrary bytes: a response, whose denial is a decode
//     error, a code or an injected failure);
//   - a denial's message starts with one of SPEC §3's codes that the
//     handler can give, or it is an HTTP 400 for an object that does not
//     decode (or an operation the validator does not know), or an HTTP 500
//     carrying a client failure this harness injected;
//   - a reply's mutation (its patch applied to the input, and the result
//     read as the API server reads it: keys case-sensitive, unknown fields
//     dropped) yields spec.answeredBy exactly the request's user, whatever
//     the input claimed, and changes nothing but that, the question label,
//     the agent label where the client set none (a client's label, even a
//     conflicting one, is kept) and the owner reference; a question's
//     mutation sets only the agent label (when missing) and, on creation,
//     spec.askedAt, and never denies (asking is the policies' to refuse);
//   - a question's spec.askedBy is the requester on creation, whatever the
//     client claimed; on update a left-out one is the stored one, and the
//     CRD's rule (evaluated here as the API server evaluates it) refuses
//     with NOT_OWNER, naming spec.askedBy, exactly the updates that change
//     or drop a stored stamp or add one to a question that had none (asked
//     before the stamp existed), so no caller forges one;
//   - a claim's mutation yields spec.holder exactly the request's user, on
//     creation and renewal, whatever the client claimed and whoever held
//     it, the question and agent labels from the spec, and nothing else,
//     and never denies (FORBIDDEN and NOT_OWNER on claims are the
//     claim-identity and claim-owner policies' rules);
//   - the reply validator allows exactly the replies SPEC §1–§3 allow: to
//     an existing, answerable question without a queued reply, from a user
//     who may answer its agent, without an agent label that names another
//     agent, without a spec.questionRef.uid other than the question's, not
//     from the question's spec.askedBy when it holds an Approval or
//     PlanReview intent, with a batch ValidateAnswers accepts; and a denial
//     names the first of those rules the request breaks, in the
//     validator's order, with its code and its field;
//   - every SubjectAccessReview asks about the requesting user, for verb
//     answer on the question's agent in its namespace, and one is sent for
//     every reply to an existing question.
func FuzzWebhookHandlers(f *testing.F) {
	for _, s := range fzSeeds {
		f.Add(s.ctl, s.text, s.obj, s.old)
	}
	f.Fuzz(func(t *testing.T, ctl []byte, text string, obj, old []byte) {
		runWebhookCase(t, decodeWebhookCase(ctl, text, obj, old))
	})
}

// Each seed reaches the outcome its name says, so the corpus keeps
// covering every path when the decoder changes.
func TestWebhookHandlerSeeds(t *testing.T) {
	for _, s := range fzSeeds {
		t.Run(s.name, func(t *testing.T) {
			if got := runWebhookCase(t, decodeWebhookCase(s.ctl, s.text, s.obj, s.old)); got != s.want {
				t.Fatalf("outcome %q, want %q", got, s.want)
			}
		})
	}
}

// A fixed pseudo-random sweep of FuzzWebhookHandlers' properties, so that
// plain `go test` checks them on a few thousand requests, and checks that
// every outcome is reached. Control bytes are zero (the ordinary choice)
// half of the time, so that ordinary requests are common.
func TestWebhookHandlerSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 29))
	byteOf := func() byte {
		if rng.IntN(2) == 0 {
			return 0
		}
		return byte(rng.UintN(256))
	}
	texts := []string{"", "coder", "q", "ns", "system:serviceaccount:ns:coder", "a/b", "{", "\x00\xff", `"}`, strings.Repeat("é", 300)}
	junk := [][]byte{nil, []byte("{}"), []byte("null"), []byte(`{"kind":"QuestionReply"}`), []byte(`{"spec":{"answeredBy":"x"}}`), []byte{0xff, 0xfe}}
	const n = 4000
	seen := map[string]int{}
	for range n {
		ctl := make([]byte, fzAtEnd)
		short := rng.IntN(4) // the last bytes left off, read as zeros
		for i := range ctl {
			ctl[i] = byteOf()
		}
		ctl[fzAtHandler] = byte(rng.IntN(fzHandlers))
		if rng.IntN(4) == 0 {
			// A quarter are the tenancy rules' cases: the requester
			// answering what it asked, with an intent that needs another
			// approver or not; an update of a stamped question that
			// claims a stamp; a claim created or renewed claiming a holder
			// over another.
			switch int(ctl[fzAtHandler]) {
			case fzReplyValidate:
				ctl[fzAtAskedBy], ctl[fzAtIntent] = 1, byte(rng.IntN(8))
			case fzQuestionMutate:
				ctl[fzAtOp], ctl[fzAtOldStamp], ctl[fzAtClaimed] = 3, byte(rng.IntN(7)), byte(rng.IntN(12))
			case fzClaimMutate:
				ctl[fzAtOp], ctl[fzAtOldStamp], ctl[fzAtClaimed] = byte(3*rng.IntN(2)), byte(rng.IntN(7)), byte(rng.IntN(12))
			}
		}
		ctl = ctl[:len(ctl)-short]
		c := decodeWebhookCase(ctl, texts[rng.IntN(len(texts))], junk[rng.IntN(len(junk))], junk[rng.IntN(len(junk))])
		seen[fzHandlerNames[c.handler]+": "+runWebhookCase(t, c)]++
	}
	for _, want := range []string{
		"question defaulter: patched", "question defaulter: allowed", "question defaulter: 400",
		"reply defaulter: patched", "reply defaulter: allowed", "reply defaulter: 400", "reply defaulter: 500 injected",
		"reply validator: allowed", "reply validator: FORBIDDEN", "reply validator: AGENT_MISMATCH", "reply validator: NOT_ANSWERABLE",
		"reply validator: REPLY_QUEUED", "reply validator: BAD_ANSWER", "reply validator: 400", "reply validator: 500 injected",
		"reply validator: SELF_APPROVAL", "question defaulter: " + fzOutcomeCRDRefused,
		"claim defaulter: patched", "claim defaulter: allowed", "claim defaulter: 400",
	} {
		if seen[want] < 5 {
			t.Errorf("the sweep reached %q %d times; the decoder is lopsided", want, seen[want])
		}
	}
	t.Logf("outcomes of %d requests: %v", n, seen)
}
