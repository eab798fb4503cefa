package userquestion

import (
	"context"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hitlv1 "github.com/hitl-dev/hitl/api/v1alpha1"
	"github.com/hitl-dev/hitl/api/v1alpha1/validation"
)

// effectiveApproval is the strictest of the agent's own rule and the
// policies that govern the question: the most approvals, every set of
// every one of them, a veto if any asks for one, the requester excluded
// if any excludes it. Nil when neither exists.
func effectiveApproval(own *hitlv1.ApprovalRule, policies []hitlv1.ApprovalPolicy) *hitlv1.EffectiveApproval {
	if own == nil && len(policies) == 0 {
		return nil
	}
	e := &hitlv1.EffectiveApproval{}
	add := func(source string, r *hitlv1.ApprovalRule) {
		e.Approvals = max(e.Approvals, r.Approvals)
		e.Veto = e.Veto || r.VetoEnabled()
		e.ExcludeRequester = e.ExcludeRequester || r.RequesterExcluded()
		for _, s := range r.From {
			if source != "" {
				s.Name = source + "/" + s.Name
			}
			e.From = append(e.From, s)
		}
	}
	if own != nil {
		add("", own)
	}
	sorted := slices.Clone(policies)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i := range sorted {
		add(sorted[i].Name, &sorted[i].Spec.Rule)
		if len(e.Policies) < 64 {
			e.Policies = append(e.Policies, hitlv1.PolicyReference{Name: sorted[i].Name, Generation: sorted[i].Generation})
		}
	}
	sort.Slice(e.From, func(i, j int) bool { return e.From[i].Name < e.From[j].Name })
	return e
}

// inSet reports whether the identity belongs to the set.
func inSet(s *hitlv1.ApproverSet, by *hitlv1.UserInfo) bool {
	if slices.Contains(s.Users, by.Username) {
		return true
	}
	return slices.ContainsFunc(by.Groups, func(g string) bool { return slices.Contains(s.Groups, g) })
}

// choiceOf is what a batch says of the approvals asked: Approve when it
// selects the approving option of every Approval and PlanReview question
// (or "always" of an Approval), Reject otherwise. A batch for questions
// without those intents approves: on such a question each reply is one
// more person's answer.
func choiceOf(q *hitlv1.UserQuestion, answers []hitlv1.AnswerItem) hitlv1.VoteChoice {
	picked := func(id string) []string {
		for _, a := range answers {
			if a.ID == id {
				if a.Custom != "" {
					return nil
				}
				return a.Selected
			}
		}
		return nil
	}
	for _, qq := range q.Spec.Questions {
		in := qq.Intent
		if in == nil {
			continue
		}
		sel := picked(qq.ID)
		switch {
		case in.Approval != nil:
			if len(sel) != 1 || (sel[0] != in.Approval.Approve && (in.Approval.Always == "" || sel[0] != in.Approval.Always)) {
				return hitlv1.VoteReject
			}
		case in.PlanReview != nil:
			if len(sel) != 1 || sel[0] != in.PlanReview.Approve {
				return hitlv1.VoteReject
			}
		}
	}
	return hitlv1.VoteApprove
}

// votedBy reports whether the identity already has a vote among votes.
func votedBy(votes []hitlv1.Vote, by *hitlv1.UserInfo) bool {
	return slices.ContainsFunc(votes, func(v hitlv1.Vote) bool { return v.By.Username == by.Username })
}

// counted reports whether votes hold reply r's vote (same name and UID).
func counted(votes []hitlv1.Vote, r *hitlv1.QuestionReply) bool {
	return slices.ContainsFunc(votes, func(v hitlv1.Vote) bool {
		return v.Reply == r.Name && (v.ReplyUID == "" || v.ReplyUID == r.UID)
	})
}

func countedMessage(q *hitlv1.UserQuestion) string {
	return fmt.Sprintf("counted as a vote on question %s (status.votes); the question is not decided yet", q.Name)
}

// vote counts reply r on a governed question: once per identity, never the
// requester's when the rule excludes it, and at most MaxVotes. The vote
// that meets the rule, or vetoes, decides: it settles an Open question, or
// is queued on a Continued one for the agent to admit, as a late reply is.
func (d *decider) vote(r *hitlv1.QuestionReply) {
	q, rule := d.in.Question, d.st.Approval
	if err := validation.ValidateAnswers(q.Spec.Questions, r.Spec.Answers); err != nil {
		d.reject(r, hitlv1.CodeBadAnswer, err.Error())
		return
	}
	by := r.Spec.AnsweredBy
	if by == nil || by.Username == "" {
		// Refused before it gets here (see Reconciler.refusals).
		d.rejectAlone(r, hitlv1.CodeForbidden, fmt.Sprintf("reply %s carries no authenticated author (spec.answeredBy)", r.Name))
		return
	}
	if rule.ExcludeRequester && hitlv1.SameUser(by, q.Spec.AskedBy) {
		d.rejectAlone(r, hitlv1.CodeSelfApproval, fmt.Sprintf("%s asked question %s (spec.askedBy), and its approval rule excludes the requester (status.approval.excludeRequester)",
			by.Username, q.Name))
		return
	}
	if votedBy(d.st.Votes, by) {
		d.reject(r, hitlv1.CodeDuplicateVote, fmt.Sprintf("%s has already voted on question %s (status.votes); each identity votes once (spec.answeredBy)",
			by.Username, q.Name))
		return
	}
	if len(d.st.Votes) >= hitlv1.MaxVotes {
		d.reject(r, hitlv1.CodeNotAnswerable, fmt.Sprintf("question %s holds %d votes, the most it records (status.votes)", q.Name, hitlv1.MaxVotes))
		return
	}
	// The voter's groups are not kept: what they decided is in sets, and
	// 64 votes of 64 groups each would not fit in an object.
	v := hitlv1.Vote{Reply: r.Name, ReplyUID: r.UID, By: hitlv1.UserInfo{Username: by.Username, UID: by.UID},
		Choice: choiceOf(q, r.Spec.Answers), At: metav1.NewMicroTime(d.in.Now)}
	if v.Choice == hitlv1.VoteApprove {
		for i := range rule.From {
			if inSet(&rule.From[i], by) {
				v.Sets = append(v.Sets, rule.From[i].Name)
			}
		}
	}
	d.st.Votes = append(d.st.Votes, v)
	d.st.Tally = rule.Tally(d.st.Votes)
	if c := rule.Count(d.st.Votes); !c.Approved && !c.Rejected {
		d.outcome(r, hitlv1.OutcomeCounted, "", countedMessage(q))
		return
	}
	switch d.st.State {
	case hitlv1.StateContinued:
		d.st.QueuedReply = ptr.To(d.entry(r, by))
		d.outcome(r, hitlv1.OutcomeQueued, "", fmt.Sprintf("queued on question %s until the agent admits it", q.Name))
	case hitlv1.StateOpen:
		d.settle(d.entry(r, by), false)
		d.outcome(r, hitlv1.OutcomeApplied, "", fmt.Sprintf("settled question %s inside its window", q.Name))
	}
}

// unvote drops the vote of a withdrawn queued reply: the decision it made
// is gone with it, and the next vote decides again.
func (d *decider) unvote(name string, uid types.UID) {
	if d.st.Approval == nil {
		return
	}
	d.st.Votes = slices.DeleteFunc(d.st.Votes, func(v hitlv1.Vote) bool { return v.Reply == name && v.ReplyUID == uid })
	d.st.Tally = d.st.Approval.Tally(d.st.Votes)
}

// policiesOf lists, from the cache, the ApprovalPolicies of q's namespace
// that govern it. The cache keeps no question labels: when a policy
// selects by label, the question's labels are read from the API server,
// once per question, on its first look only.
func (r *Reconciler) policiesOf(ctx context.Context, q *hitlv1.UserQuestion) ([]hitlv1.ApprovalPolicy, error) {
	var list hitlv1.ApprovalPolicyList
	if err := r.List(ctx, &list, client.InNamespace(q.Namespace)); err != nil {
		return nil, fmt.Errorf("listing approval policies: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	var questionLabels map[string]string
	if slices.ContainsFunc(list.Items, func(p hitlv1.ApprovalPolicy) bool { return p.Spec.Selector.QuestionSelector != nil }) {
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(hitlv1.GroupVersion.WithKind("UserQuestion"))
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(q), m); err != nil {
			return nil, fmt.Errorf("reading the labels of question %s: %w", q.Name, err)
		}
		questionLabels = m.Labels
	}
	var governing []hitlv1.ApprovalPolicy
	for i := range list.Items {
		if list.Items[i].Governs(q, questionLabels) {
			governing = append(governing, list.Items[i])
		}
	}
	return governing, nil
}

// recordVotes counts and announces the votes a status write added: an
// Event on the question for each, with the tally after it.
func (r *Reconciler) recordVotes(q *hitlv1.UserQuestion, was, now *hitlv1.UserQuestionStatus) {
	for _, v := range now.Votes {
		if slices.ContainsFunc(was.Votes, func(w hitlv1.Vote) bool { return w.Reply == v.Reply && w.ReplyUID == v.ReplyUID }) {
			continue
		}
		votesTotal.WithLabelValues(string(v.Choice)).Inc()
		r.Recorder.Eventf(q, nil, corev1.EventTypeNormal, "Voted", "Vote", "%s voted %s with reply %s; approvals %s", v.By.Username, v.Choice, v.Reply, now.Tally)
	}
}
