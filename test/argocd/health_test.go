// Package argocd runs the Argo CD health checks of config/argocd/argocd-cm.yaml
// in gopher-lua, the interpreter Argo CD embeds, against questions and
// replies in every state, as Argo CD calls them: the object as a Lua table
// in the global obj, a table {status, message} returned.
package argocd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	lua "github.com/yuin/gopher-lua"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/test/testenv"
)

// checks reads the health checks from the ConfigMap users apply.
func checks(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.Root(), "config", "argocd", "argocd-cm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		t.Fatal(err)
	}
	if cm.Name != "argocd-cm" || cm.Namespace != "argocd" {
		t.Errorf("the ConfigMap is %s/%s, not Argo CD's argocd/argocd-cm", cm.Namespace, cm.Name)
	}
	return cm.Data
}

// health runs script with obj as Argo CD does.
func health(t *testing.T, script string, obj any) (status, message string) {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	L := lua.NewState()
	defer L.Close()
	L.SetGlobal("obj", toLua(L, m))
	if err := L.DoString(script); err != nil {
		t.Fatalf("the health check fails: %v", err)
	}
	ret, ok := L.Get(-1).(*lua.LTable)
	if !ok {
		t.Fatalf("the health check returned %s, not a table", L.Get(-1).Type())
	}
	return lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
}

// toLua converts decoded JSON to Lua values as Argo CD does.
func toLua(L *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case []any:
		t := L.NewTable()
		for _, e := range v {
			t.Append(toLua(L, e))
		}
		return t
	case map[string]any:
		t := L.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(L, e))
		}
		return t
	}
	panic("unexpected JSON value")
}

func question(mutate func(*hitlv1.UserQuestion)) *hitlv1.UserQuestion {
	q := &hitlv1.UserQuestion{
		TypeMeta:   metav1.TypeMeta{APIVersion: hitlv1.GroupVersion.String(), Kind: "UserQuestion"},
		ObjectMeta: metav1.ObjectMeta{Name: "deploy-target", Namespace: "agents", Generation: 1},
		Spec:       hitlv1.UserQuestionSpec{Agent: "release-bot", Questions: []hitlv1.Question{{ID: "target", Question: "Where?"}}},
	}
	mutate(q)
	return q
}

func TestUserQuestionHealth(t *testing.T) {
	script := checks(t)["resource.customizations.health.hitl.dev_UserQuestion"]
	if script == "" {
		t.Fatal("no health check for hitl.dev/UserQuestion")
	}
	deadline := metav1.NewMicroTime(metav1.Now().Add(0))
	cases := []struct {
		name          string
		q             *hitlv1.UserQuestion
		status, inMsg string
	}{
		{"not yet seen by the controller", question(func(q *hitlv1.UserQuestion) {}), "Progressing", "controller"},
		{"open, blocking", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateOpen, 1
		}), "Suspended", "Waiting for an answer"},
		{"open, timed", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration, q.Status.Deadline = hitlv1.StateOpen, 1, &deadline
		}), "Suspended", "until"},
		{"open, claimed", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateOpen, 1
			q.Status.Claims = []hitlv1.ClaimHolder{{Name: "l1", Holder: "alice"}, {Name: "l2"}}
		}), "Progressing", "alice, l2 answering"},
		{"continued", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateContinued, 1
		}), "Suspended", "stays answerable"},
		{"continued with a queued reply", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateContinued, 1
			q.Status.QueuedReply = &hitlv1.QueuedReply{Name: "late-alice"}
		}), "Suspended", "late-alice is queued"},
		{"cancel requested, not yet observed", question(func(q *hitlv1.UserQuestion) {
			q.Spec.Cancelled, q.Generation = true, 2
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateOpen, 1
		}), "Progressing", "generation 2"},
		{"settled", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateSettled, 1
			q.Status.Settlement = &hitlv1.Settlement{Reply: "r", AnsweredBy: &hitlv1.UserInfo{Username: "alice"}}
		}), "Healthy", "Settled by alice"},
		{"settled late", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateSettled, 2
			q.Generation = 2
			q.Status.Settlement = &hitlv1.Settlement{Reply: "r", AnsweredBy: &hitlv1.UserInfo{Username: "bob"}, Late: true}
		}), "Healthy", "bob (late)"},
		// Terminal states do not wait for the generation to be observed.
		{"settled, then an ignored spec write", question(func(q *hitlv1.UserQuestion) {
			q.Status.State, q.Status.ObservedGeneration, q.Generation = hitlv1.StateSettled, 1, 3
		}), "Healthy", "Settled"},
		{"cancelled", question(func(q *hitlv1.UserQuestion) {
			q.Spec.Cancelled, q.Generation = true, 2
			q.Status.State, q.Status.ObservedGeneration = hitlv1.StateCancelled, 2
		}), "Degraded", "cancelled"},
		{"an unknown state", question(func(q *hitlv1.UserQuestion) {
			q.Status.State = "Paused"
		}), "Progressing", "Unknown state Paused"},
	}
	states := map[hitlv1.QuestionState]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			states[c.q.Status.State] = true
			status, msg := health(t, script, c.q)
			if status != c.status || !strings.Contains(msg, c.inMsg) {
				t.Errorf("health %s %q, want %s with %q", status, msg, c.status, c.inMsg)
			}
		})
	}
	for _, s := range []hitlv1.QuestionState{hitlv1.StateOpen, hitlv1.StateContinued, hitlv1.StateSettled, hitlv1.StateCancelled} {
		if !states[s] {
			t.Errorf("no case of state %s", s)
		}
	}
}

func TestQuestionReplyHealth(t *testing.T) {
	script := checks(t)["resource.customizations.health.hitl.dev_QuestionReply"]
	if script == "" {
		t.Fatal("no health check for hitl.dev/QuestionReply")
	}
	reply := func(st hitlv1.QuestionReplyStatus) *hitlv1.QuestionReply {
		return &hitlv1.QuestionReply{
			TypeMeta:   metav1.TypeMeta{APIVersion: hitlv1.GroupVersion.String(), Kind: "QuestionReply"},
			ObjectMeta: metav1.ObjectMeta{Name: "r", Namespace: "agents", Generation: 1},
			Spec:       hitlv1.QuestionReplySpec{QuestionRef: hitlv1.QuestionReference{Name: "q"}},
			Status:     st,
		}
	}
	cases := []struct {
		name          string
		st            hitlv1.QuestionReplyStatus
		status, inMsg string
	}{
		{"not yet processed", hitlv1.QuestionReplyStatus{}, "Progressing", "controller"},
		{"applied", hitlv1.QuestionReplyStatus{Outcome: hitlv1.OutcomeApplied, ObservedGeneration: 1}, "Healthy", "Applied"},
		{"queued", hitlv1.QuestionReplyStatus{Outcome: hitlv1.OutcomeQueued, ObservedGeneration: 1}, "Suspended", "admit"},
		{"admitted", hitlv1.QuestionReplyStatus{Outcome: hitlv1.OutcomeAdmitted, ObservedGeneration: 1}, "Healthy", "Admitted"},
		{"a vote counted", hitlv1.QuestionReplyStatus{Outcome: hitlv1.OutcomeCounted, ObservedGeneration: 1}, "Healthy", "Counted"},
		{"rejected", hitlv1.QuestionReplyStatus{Outcome: hitlv1.OutcomeRejected, ObservedGeneration: 1, Reason: hitlv1.CodeNotAnswerable, Message: "NOT_ANSWERABLE: the question is Settled"},
			"Degraded", "Rejected: NOT_ANSWERABLE"},
		{"closed: its question finished or gone", hitlv1.QuestionReplyStatus{Outcome: hitlv1.OutcomeClosed, ObservedGeneration: 1, Reason: hitlv1.CodeNotAnswerable,
			Message: "NOT_ANSWERABLE: question q is Settled"}, "Healthy", "Closed"},
		{"an unknown outcome", hitlv1.QuestionReplyStatus{Outcome: "Deferred"}, "Progressing", "Unknown outcome Deferred"},
	}
	outcomes := map[hitlv1.ReplyOutcome]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outcomes[c.st.Outcome] = true
			status, msg := health(t, script, reply(c.st))
			if status != c.status || !strings.Contains(msg, c.inMsg) {
				t.Errorf("health %s %q, want %s with %q", status, msg, c.status, c.inMsg)
			}
		})
	}
	for _, o := range []hitlv1.ReplyOutcome{hitlv1.OutcomeApplied, hitlv1.OutcomeQueued, hitlv1.OutcomeAdmitted, hitlv1.OutcomeRejected, hitlv1.OutcomeCounted, hitlv1.OutcomeClosed} {
		if !outcomes[o] {
			t.Errorf("no case of outcome %s", o)
		}
	}
}
