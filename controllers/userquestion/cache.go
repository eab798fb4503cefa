package userquestion

import (
	"context"
	"fmt"
	"unique"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/internal/rewatch"
)

// lastAppliedAnnotation is where client-side `kubectl apply` (and GitOps
// tools using it) keeps a full copy of the applied object.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// CacheOptions keeps the manager's cache small: each object without what
// the controller never reads (see trimForCache). Its informers' watches outlast API server outages (see
// rewatch): with client-go's own waits, a cache could miss the questions
// created after an API server restart for many seconds, and their
// deadlines with them.
func CacheOptions() cache.Options {
	return cache.Options{
		NewInformer:      rewatch.NewInformer,
		DefaultTransform: trimForCache,
	}
}

// trimForCache drops from an object, before the cache stores it, what the
// controller never reads: managedFields and the last-applied annotation of
// every object; the text of a question (see dropText); the labels of a
// question (nothing in the manager selects
// or reads questions by label: the agents' watches select them on the API
// server); and the answers, author and conditions of a reply whose outcome
// is final (Applied, Admitted, Rejected), and its labels once it has been
// adopted (see adopted). A final outcome never changes,
// so such a reply is only ever compared by outcome, reason and message;
// the answers and author that settled a question live on in the question's
// status. The strings that repeat from object to object (namespaces,
// label keys, states, reasons, users and groups) are shared between the
// cached objects rather than held once per object (see intern).
//
// Status writes are safe on trimmed objects: the API server keeps the
// stored metadata and spec on a status update, and a reply's status is
// written only while its outcome is not final.
func trimForCache(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		if m.GetManagedFields() != nil { // setting nil on nil breaks some list types (kubernetes#124337)
			m.SetManagedFields(nil)
		}
		if a := m.GetAnnotations(); a[lastAppliedAnnotation] != "" {
			delete(a, lastAppliedAnnotation)
			m.SetAnnotations(a)
		}
	}
	switch o := obj.(type) {
	case *hitlv1.UserQuestion:
		o.Labels = nil
		if o.Status.SpecDigest == "" {
			// Taken before the text goes: the controller writes it with
			// the question's first status.
			o.Status.SpecDigest = hitlv1.SpecDigest(&o.Spec)
		}
		dropText(o)
		internMeta(&o.TypeMeta, &o.ObjectMeta, "")
		internQuestion(o)
	case *hitlv1.QuestionReply:
		if finalOutcome(o.Status.Outcome) {
			o.Spec.Answers = nil
			o.Spec.AnsweredBy = nil
			o.Status.Conditions = nil
			if adopted(o) {
				o.Labels = trimmedLabels
			}
		}
		internMeta(&o.TypeMeta, &o.ObjectMeta, hitlv1.QuestionLabel)
		internUser(o.Spec.AnsweredBy)
		internAnswers(o.Spec.Answers)
		o.Status.Outcome = hitlv1.ReplyOutcome(intern(string(o.Status.Outcome)))
		o.Status.Reason = hitlv1.ErrorCode(intern(string(o.Status.Reason)))
		internConditions(o.Status.Conditions)
	case *hitlv1.QuestionClaim:
		internMeta(&o.TypeMeta, &o.ObjectMeta, hitlv1.QuestionLabel)
		o.Spec.Agent = intern(o.Spec.Agent)
		internUser(o.Spec.Holder)
	}
	return obj, nil
}

// trimmedLabels stands, in the cache, for the labels of a final reply
// that had been adopted (see adopted): labelsTrimmed tells it from a
// reply without labels, which decodes with nil labels. It is shared by
// every such reply and never written: the cache's readers get deep
// copies, each with a map of its own. Each reply's own map of its two
// labels was a tenth of the cache at 100,000 questions.
var trimmedLabels = map[string]string{}

// adopted reports whether a reply carries the labels and the owner
// reference that adoption gives it (see Reconciler.adopt): both labels,
// the question's the one it names, and an owner reference to a question
// of that name.
func adopted(r *hitlv1.QuestionReply) bool {
	if _, ok := r.Labels[hitlv1.AgentLabel]; !ok || r.Labels[hitlv1.QuestionLabel] != r.Spec.QuestionRef.Name {
		return false
	}
	for _, o := range r.OwnerReferences {
		if o.Kind == "UserQuestion" && o.Name == r.Spec.QuestionRef.Name && o.APIVersion == hitlv1.GroupVersion.String() {
			return true
		}
	}
	return false
}

// labelsTrimmed reports whether the cache dropped a final reply's labels
// because it had been adopted.
func labelsTrimmed(r *hitlv1.QuestionReply) bool {
	return r.Labels != nil && len(r.Labels) == 0
}

// intern returns s, sharing its bytes with every other interned string
// equal to it. Only strings that repeat across objects are worth it: each
// distinct one costs an entry in the process's table of unique values.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// internMeta interns an object's type, namespace, owners' kinds and labels,
// but the values of the label unique, which differ from object to object.
func internMeta(t *metav1.TypeMeta, m *metav1.ObjectMeta, unique string) {
	t.APIVersion, t.Kind = intern(t.APIVersion), intern(t.Kind)
	m.Namespace = intern(m.Namespace)
	if len(m.Labels) > 0 {
		labels := make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			if k != unique {
				v = intern(v)
			}
			labels[intern(k)] = v
		}
		m.Labels = labels
	}
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
	}
}

// dropText drops from a question what people read and the controller
// never decides on: each question's text, detail and header, its options'
// descriptions, and an approval's subject and localized display. What
// remains (ids, option labels, multiSelect, the intents' types and labels)
// is what replies are checked against. A question's text can be 64 KiB;
// what remains is a few hundred bytes.
func dropText(q *hitlv1.UserQuestion) {
	for i := range q.Spec.Questions {
		qq := &q.Spec.Questions[i]
		qq.Question, qq.Detail, qq.Header = "", "", ""
		for j := range qq.Options {
			qq.Options[j].Description = ""
		}
		if in := qq.Intent; in != nil && in.Approval != nil {
			in.Approval.Subject, in.Approval.Display = nil, nil
		}
	}
}

func internQuestion(q *hitlv1.UserQuestion) {
	q.Spec.Agent = intern(q.Spec.Agent)
	q.Spec.Origin = hitlv1.Origin(intern(string(q.Spec.Origin)))
	internUser(q.Spec.AskedBy)
	for i := range q.Spec.Questions {
		q.Spec.Questions[i].ID = intern(q.Spec.Questions[i].ID)
	}
	st := &q.Status
	st.State = hitlv1.QuestionState(intern(string(st.State)))
	internConditions(st.Conditions)
	internAnswers(st.Answers)
	if st.Settlement != nil {
		internUser(st.Settlement.AnsweredBy)
	}
	if st.QueuedReply != nil {
		internUser(st.QueuedReply.AnsweredBy)
		internAnswers(st.QueuedReply.Answers)
	}
}

func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Reason = intern(c.Type), intern(c.Reason)
		c.Status = metav1.ConditionStatus(intern(string(c.Status)))
	}
}

// internAnswers interns the question ids of answers and the options they
// select (custom text stays as it is).
func internAnswers(as []hitlv1.AnswerItem) {
	for i := range as {
		a := &as[i]
		a.ID = intern(a.ID)
		for j := range a.Selected {
			a.Selected[j] = intern(a.Selected[j])
		}
	}
}

func internUser(u *hitlv1.UserInfo) {
	if u == nil {
		return
	}
	u.Username = intern(u.Username)
	for i := range u.Groups {
		u.Groups[i] = intern(u.Groups[i])
	}
}

// indexRepliesByQuestion indexes the cached replies by
// spec.questionRef.name within their namespace, under the name and in the
// form controller-runtime's cache reader looks up for a List of replies
// InNamespace and MatchingFields{ReplyQuestionIndex: name}.
// mgr.GetFieldIndexer().IndexField would also index every reply under its
// question's name across all namespaces, a lookup nothing makes, which
// costs a set per reply: a fifth of the cache's memory at 100,000
// questions. A List of replies by question across all namespaces finds
// none.
//
// A final reply that was adopted (the cache keeps its labels trimmed, see
// labelsTrimmed) is left out of the index: its outcome never changes, its
// question records what it did (the settlement, the votes), and nothing
// the controller decides reads it again (Decide passes over a final
// outcome; adoption over an adopted reply). Indexed, each cost a set of
// its own, about 200 bytes, a question's only entry under its key: some
// 25 MiB at 100,000 settled questions, twice that in resident memory
// between collections. The one reader of every reply of a question,
// expire, lists the adopted ones from the API server by their question
// label (see adoptedReplies).
func indexRepliesByQuestion(ctx context.Context, informers cache.Informers) error {
	informer, err := informers.GetInformer(ctx, &hitlv1.QuestionReply{})
	if err != nil {
		return fmt.Errorf("getting the reply informer: %w", err)
	}
	return informer.AddIndexers(toolscache.Indexers{"field:" + ReplyQuestionIndex: replyQuestionKey})
}

// replyQuestionKey is where the index of replies by question files a
// cached reply: under its namespace and question, or nowhere when it is
// final and adopted.
func replyQuestionKey(obj any) ([]string, error) {
	r, ok := obj.(*hitlv1.QuestionReply)
	if !ok {
		return nil, fmt.Errorf("indexing replies by question: got a %T", obj)
	}
	if labelsTrimmed(r) {
		return nil, nil
	}
	return []string{r.Namespace + "/" + r.Spec.QuestionRef.Name}, nil
}

func finalOutcome(o hitlv1.ReplyOutcome) bool {
	return o == hitlv1.OutcomeApplied || o == hitlv1.OutcomeAdmitted || o == hitlv1.OutcomeRejected || o == hitlv1.OutcomeCounted ||
		o == hitlv1.OutcomeClosed
}
